//! The README's first commands exactly as an operator types them: a config
//! given by a relative path, its relative `state_dir`, `forgehand eval`'s
//! default `--out`, each run from a folder that is not the checkout. Docker's
//! bind mounts and `file://` URLs take only absolute paths, so a relative one
//! reaching them failed every task. And `examples/minimal.yaml` copied into
//! an empty folder: the images and the prompts come from the binary.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support as common;
use forgehand_test_support::daemon_rig;
use forgehand_test_support::eval_fixture::{self, instance, source_repository};
use forgehand_test_support::github_world::{World, DONE, MODEL_KEY, REPO};
use forgehand_test_support::scripted_model::{edit_and_commit, Format, TurnModel};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// `config`'s text with its absolute `state_dir` replaced by `state`.
fn with_relative_state_dir(config: &Path) -> String {
    let text = std::fs::read_to_string(config).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("state_dir:") {
            out.push_str("  state_dir: \"state\"\n");
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    assert!(out.contains("state_dir: \"state\""), "{out}");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_with_a_relative_config_and_state_dir_from_another_folder_delivers() {
    let world = World::new(edit_and_commit(Duration::ZERO)).await;
    let gh = &world.github;
    let issue = gh.open_issue(REPO, "maya", "Greet the world", "Say hello to the world.");
    let conf = world.dir.path().join("conf");
    let elsewhere = world.dir.path().join("elsewhere");
    std::fs::create_dir_all(&conf).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(conf.join("minimal.yaml"), with_relative_state_dir(&world.config)).unwrap();

    let url = format!("https://github.com/{REPO}/issues/{issue}");
    let log = world.log_path();
    let (status, _) = daemon_rig::run_to_end_in(
        Some(&elsewhere),
        Path::new("../conf/minimal.yaml"),
        &["once", &url],
        &world.env(),
        &log,
    )
    .await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "{text}");
    assert!(text.contains("Delivered"), "{text}");
    assert!(!text.contains("must be absolute"), "{text}");
    assert_eq!(gh.pulls(REPO).len(), 1);
    assert_eq!(gh.issue(REPO, issue).labels, vec![DONE.to_owned()]);
    // The state is beside the config file, as the docs say, not in the
    // folder the command ran in.
    assert!(conf.join("state").is_dir());
    assert!(!elsewhere.join("state").exists());
}

#[tokio::test]
async fn eval_with_its_default_out_from_another_folder_scores_the_instance() {
    forgehand_test_support::ensure_images().await;
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let (first, _) = source_repository(&source);
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let unittest = "python3 -m unittest {test}";
    std::fs::write(
        work.join("instances.jsonl"),
        format!("{}\n", instance("calc-fixed", &source, &first, unittest)),
    )
    .unwrap();
    let model = eval_fixture::model().await;
    let conf = dir.path().join("conf");
    std::fs::create_dir_all(&conf).unwrap();
    let config = daemon_rig::write_config(
        &conf,
        &forgehand_test_support::unique("test-first-eval"),
        "planning:\n  mode: \"single\"\n",
    );
    std::fs::write(&config, with_relative_state_dir(&config)).unwrap();
    let env = vec![
        ("OPENAI_API_KEY", MODEL_KEY.to_owned()),
        ("OPENAI_BASE_URL", model.base_url()),
    ];
    let log = dir.path().join("eval.log");
    let (status, stdout) = daemon_rig::run_to_end_in(
        Some(&work),
        Path::new("../conf/config.yaml"),
        &["eval", "instances.jsonl"],
        &env,
        &log,
    )
    .await;
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "{stdout}\n{logged}");
    assert!(stdout.contains("Resolved 1 of 1"), "{stdout}\n{logged}");
    // The default `--out` is the folder the command ran in.
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(work.join("eval-out/report.json")).unwrap()).unwrap();
    assert_eq!(report["instances"][0]["status"], "resolved", "{report:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_minimal_example_copied_into_an_empty_folder_passes_doctor_and_delivers() {
    // The fake forge speaks for github.com; the default models' first is an
    // OpenAI Responses model, so the scripted server speaks that API.
    let mut world = World::new(edit_and_commit(Duration::ZERO)).await;
    world.model = TurnModel::start_as(
        Format::Responses,
        edit_and_commit(Duration::ZERO),
        Some("1. Change greet.py to greet the world.".into()),
        None,
    )
    .await;
    let gh = &world.github;
    let issue = gh.open_issue(REPO, "maya", "Greet the world", "Say hello to the world.");
    // The README's step 2: copy the file anywhere, name the repository.
    let folder = world.dir.path().join("my-forgehand");
    std::fs::create_dir(&folder).unwrap();
    let example = std::fs::read_to_string(common::repo_root().join("examples/minimal.yaml")).unwrap();
    assert!(example.contains("your-org/your-repo"));
    std::fs::write(
        folder.join("minimal.yaml"),
        example.replace("your-org/your-repo", REPO),
    )
    .unwrap();
    let mut env = world.env();
    env.push(("GITHUB_API_URL", gh.api_url()));
    let log = world.log_path();

    let (status, stdout) =
        daemon_rig::run_to_end_in(Some(&folder), Path::new("minimal.yaml"), &["doctor"], &env, &log).await;
    assert!(status.success(), "{stdout}");
    assert!(stdout.contains("the built-in prompts"), "{stdout}");
    assert!(!stdout.contains("FAIL"), "{stdout}");

    let url = format!("https://github.com/{REPO}/issues/{issue}");
    let (status, _) = daemon_rig::run_to_end_in(
        Some(&folder),
        Path::new("minimal.yaml"),
        &["once", &url],
        &env,
        &log,
    )
    .await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "{text}");
    assert!(text.contains("Delivered"), "{text}");
    assert_eq!(gh.pulls(REPO).len(), 1);
    assert_eq!(gh.issue(REPO, issue).labels, vec![DONE.to_owned()]);
    assert!(folder.join("state").is_dir(), "the state is kept beside the file");
    // The folder holds nothing of the checkout: the images and the prompts
    // came from the binary.
    let mut names: Vec<_> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["minimal.yaml", "state"]);
}
