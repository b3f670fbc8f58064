//! `forgehand eval`: three instances of one small local repository run
//! through the whole pipeline (planning, the sandbox, the agent, the push)
//! with the scripted model, then scored in a sandbox: one it fixes, one it
//! cannot (its bug is another), one whose tests cannot run. Then a second
//! run over the same folder, which runs nothing again.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::daemon_rig;
use forgehand_test_support::eval_fixture::{self, git, instance, source_repository, TEST_PATCH};
use forgehand_test_support::github_world::MODEL_KEY;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

/// What a `forgehand eval` run gave: its exit status, stdout and log.
struct EvalRun {
    status: std::process::ExitStatus,
    stdout: String,
    logged: String,
}

/// Runs `forgehand eval FILE --out DIR` (and `extra`) in `dir` with `env`;
/// the log is `dir/eval.log`.
async fn run_eval(
    dir: &Path,
    config: &Path,
    (file, out): (&Path, &Path),
    env: &[(&str, String)],
    extra: &[&str],
) -> EvalRun {
    let log = dir.join("eval.log");
    let mut args = vec!["eval", file.to_str().unwrap(), "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let (status, stdout) = daemon_rig::run_to_end(config, &args, env, &log).await;
    EvalRun {
        status,
        stdout,
        logged: std::fs::read_to_string(&log).unwrap(),
    }
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn three_instances_score_one_resolved_one_unresolved_and_one_error_and_a_second_run_resumes() {
    forgehand_test_support::ensure_images().await;
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let (first, second) = source_repository(&source);
    let unittest = "test \"$CALC_CHECKED\" = by-settings && python3 -m unittest {test}";
    let instances = [
        instance("calc-fixed", &source, &first, unittest),
        instance("calc-other-bug", &source, &second[..12], unittest),
        instance("calc-no-runner", &source, &first, "no-such-test-runner {test}"),
    ];
    let file = dir.path().join("instances.jsonl");
    let text_of: Vec<String> = instances.iter().map(Value::to_string).collect();
    std::fs::write(&file, text_of.join("\n") + "\n").unwrap();

    // The same turns for each instance: the replacement only fits the first bug.
    let model = eval_fixture::model().await;
    let instance_id = forgehand_test_support::unique("test-eval");
    // The instances run in the repository `local/source`: the operator's
    // settings for it apply (its env reaches the scoring's tests).
    let config = daemon_rig::write_config(
        dir.path(),
        &instance_id,
        "planning:\n  mode: \"single\"\nrepositories:\n  per_repository:\n    \"local/source\":\n      env:\n        CALC_CHECKED: \"by-settings\"\n",
    );
    let env = vec![
        ("OPENAI_API_KEY", MODEL_KEY.to_owned()),
        ("OPENAI_BASE_URL", model.base_url()),
    ];
    let out = dir.path().join("out");
    let named = ["--model-name", "forgehand-test"];
    let EvalRun {
        status,
        stdout,
        logged,
    } = run_eval(dir.path(), &config, (&file, &out), &env, &named).await;
    assert!(status.success(), "{stdout}\n{logged}");
    assert!(stdout.contains("Resolved 1 of 3"), "{stdout}");
    assert!(logged.contains("instance scored"), "{logged}");
    assert!(stdout.contains("1 unresolved, 1 error(s)"), "{stdout}");

    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let by_id = |id: &str| {
        report["instances"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["instance_id"] == id)
            .cloned()
            .unwrap()
    };
    let fixed = by_id("calc-fixed");
    assert_eq!(fixed["status"], "resolved", "{fixed:#}");
    assert_eq!(fixed["task"], "delivered", "{fixed:#}");
    assert!(fixed["cost_usd"].as_f64().unwrap() > 0.0, "{fixed:#}");
    assert!(fixed["input_tokens"].as_u64().unwrap() > 0, "{fixed:#}");
    let other = by_id("calc-other-bug");
    assert_eq!(other["status"], "unresolved", "{other:#}");
    assert_eq!(other["task"], "no_changes", "{other:#}");
    assert_eq!(
        other["tests"][0],
        json!(["test_calc.Calc.test_add", "failed"]),
        "{other:#}"
    );
    assert_eq!(
        other["tests"][1],
        json!(["test_calc.Calc.test_sub", "passed"]),
        "{other:#}"
    );
    let broken = by_id("calc-no-runner");
    assert_eq!(broken["status"], "error", "an error, not a failure: {broken:#}");
    assert!(
        broken["note"].as_str().unwrap().contains("exit code 127"),
        "{broken:#}"
    );
    assert_eq!(report["totals"]["resolved"], 1);
    assert_eq!(report["totals"]["errors"], 1);

    // preds.jsonl in SWE-bench's format: exactly its three string fields,
    // one line per instance, and each patch applies to its base commit.
    let preds = lines(&out.join("preds.jsonl"));
    assert_eq!(preds.len(), 3);
    for pred in &preds {
        let fields: Vec<&String> = pred.as_object().unwrap().keys().collect();
        assert_eq!(
            fields,
            ["instance_id", "model_name_or_path", "model_patch"],
            "{pred}"
        );
        assert!(pred.as_object().unwrap().values().all(Value::is_string), "{pred}");
        assert_eq!(pred["model_name_or_path"], "forgehand-test");
    }
    let patch = preds[0]["model_patch"].as_str().unwrap();
    assert!(patch.starts_with("diff --git a/calc.py b/calc.py"), "{patch}");
    assert!(patch.contains("+    return a + b"), "{patch}");
    assert_eq!(preds[1]["model_patch"], "", "nothing was changed");
    let check = dir.path().join("check");
    git(
        dir.path(),
        &["clone", "-q", source.to_str().unwrap(), check.to_str().unwrap()],
    );
    git(&check, &["checkout", "-q", &first]);
    std::fs::write(check.join("model.patch"), patch).unwrap();
    git(&check, &["apply", "--check", "model.patch"]);

    // The run's records: its progress comment and its transcript, no key in either.
    let comment = std::fs::read_to_string(out.join("runs/calc-fixed.md")).unwrap();
    assert!(comment.contains("add() adds now"), "{comment}");
    let transcript = std::fs::read_to_string(out.join("transcripts/calc-fixed.jsonl")).unwrap();
    assert!(transcript.contains("text_editor_str_replace"), "{transcript}");
    assert!(
        transcript.contains("\"purpose\":\"planning\""),
        "the planning call is in the transcript too: {transcript}"
    );
    for text in [&comment, &transcript, &logged, &stdout] {
        assert!(!text.contains(MODEL_KEY));
    }
    // Every sandbox (the tasks' and the scoring ones) is gone.
    assert!(daemon_rig::containers_of(&format!("{instance_id}-eval")).is_empty());

    // Again over the same folder: every instance is finished, nothing runs.
    let calls = model.all_requests().await.len();
    let again = run_eval(dir.path(), &config, (&file, &out), &env, &named).await;
    assert!(again.status.success(), "{}", again.logged);
    let again = again.stdout;
    assert!(again.contains("Resolved 1 of 3"), "{again}");
    assert_eq!(model.all_requests().await.len(), calls, "no instance ran again");
    assert_eq!(lines(&out.join("results.jsonl")).len(), 3);
}

#[tokio::test]
async fn a_bad_instances_file_is_refused_with_its_line_named_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("instances.jsonl");
    std::fs::write(
        &file,
        "{\"instance_id\": \"a\", \"repo\": \"/r\", \"base_commit\": \"abcdef0\", \"problem_statement\": \"p\", \"FAIL_TO_PASS\": []}\n",
    )
    .unwrap();
    let config = daemon_rig::write_config(dir.path(), &forgehand_test_support::unique("test-eval"), "");
    let env = vec![
        ("OPENAI_API_KEY", MODEL_KEY.to_owned()),
        ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1".to_owned()),
    ];
    let out = dir.path().join("out");
    let EvalRun { status, logged, .. } = run_eval(dir.path(), &config, (&file, &out), &env, &[]).await;
    assert!(!status.success(), "{logged}");
    assert!(
        logged.contains("line 1") && logged.contains("FAIL_TO_PASS is empty"),
        "{logged}"
    );
    assert!(!out.join("results.jsonl").exists());

    // No file named at all, or a day that is not one: said so.
    let log = dir.path().join("usage.log");
    let (status, _) = daemon_rig::run_to_end(&config, &["eval"], &env, &log).await;
    assert!(!status.success());
    let (status, _) = daemon_rig::run_to_end(
        &config,
        &["eval", "make", "--repo", "a/b", "--since", "last week"],
        &env,
        &log,
    )
    .await;
    assert!(!status.success());
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("name the instances file: forgehand eval INSTANCES.jsonl"),
        "{logged}"
    );
    assert!(
        logged.contains("--since \"last week\" is not a day (YYYY-MM-DD)"),
        "{logged}"
    );
}

/// A merged pull request's file: (path, status, patch), as GitHub lists it.
const FIX_CALC: (&str, &str, &str) = (
    "calc.py",
    "modified",
    "@@ -1,5 +1,5 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n \n \n def sub(a, b):",
);

#[tokio::test]
async fn eval_make_builds_instances_from_issues_closed_by_merged_pull_requests_that_changed_tests() {
    use forgehand_test_support::fake_github::FakeGitHub;
    use forgehand_test_support::github_world::{REPO, TOKEN};
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let (base, merge) = source_repository(&source);
    let github = FakeGitHub::start(TOKEN).await;
    github.add_repo(REPO, source.to_str().unwrap(), None);
    let tests_file: String = TEST_PATCH
        .split_once("@@")
        .map(|(_, rest)| format!("@@{rest}"))
        .unwrap();

    // Closed by a merged PR that changed the code and added a test: an instance.
    let fixed = github.open_issue(REPO, "maya", "add() subtracts", "add(2, 3) should be 5.");
    let pull = github.open_pull(REPO, "maya", "Fix add", "fix-add");
    github.merge_closing(
        REPO,
        pull,
        fixed,
        &base,
        &merge,
        &[FIX_CALC, ("test_calc.py", "added", tests_file.trim_end())],
    );
    // Closed by a merged PR that changed no test: skipped, said why.
    let untested = github.open_issue(REPO, "maya", "Typo", "In a comment.");
    let pull = github.open_pull(REPO, "maya", "Fix typo", "typo");
    github.merge_closing(REPO, pull, untested, &base, &"b".repeat(40), &[FIX_CALC]);
    // Closed by hand, and still open: not instances.
    let by_hand = github.open_issue(REPO, "maya", "Wontfix", "");
    github.close_issue(REPO, by_hand, "maya");
    github.open_issue(REPO, "maya", "Open", "");

    let forge = format!("github:\n  api_url: \"{}\"\n", github.api_url());
    let made = make_instances(
        dir.path(),
        &forge,
        &[("GITHUB_TOKEN", TOKEN.to_owned())],
        &["--repo", REPO],
    )
    .await;
    assert!(
        made.contains(&format!("skipped #{untested}")) && made.contains("touched no test"),
        "{made}"
    );
    check_made(dir.path(), &source, &base, &format!("acme__app-{fixed}"));
}

#[tokio::test]
async fn eval_make_builds_instances_from_issues_closed_by_merged_merge_requests_on_gitlab() {
    use forgehand_test_support::fake_gitlab::FakeGitLab;
    let token = "glpat-e2eEvalMakeTokenNeverLeaks01";
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let (base, _) = source_repository(&source);
    let gitlab = FakeGitLab::start(token).await;
    let project = "group/sub/app";
    gitlab.add_project(project, source.to_str().unwrap());
    let tests_file: String = TEST_PATCH
        .split_once("@@")
        .map(|(_, rest)| format!("@@{rest}"))
        .unwrap();
    let fixed = gitlab.open_issue(project, "maya", "add() subtracts", "add(2, 3) should be 5.");
    gitlab.merge_closing(
        project,
        "maya",
        fixed,
        &base,
        &[FIX_CALC, ("test_calc.py", "added", &tests_file)],
    );
    let untested = gitlab.open_issue(project, "maya", "Typo", "In a comment.");
    gitlab.merge_closing(project, "maya", untested, &base, &[FIX_CALC]);
    let by_hand = gitlab.open_issue(project, "maya", "Wontfix", "");
    gitlab.close_issue(project, by_hand);

    let forge = format!("gitlab:\n  url: \"{}\"\n", gitlab.url());
    let made = make_instances(
        dir.path(),
        &forge,
        &[("GITLAB_TOKEN", token.to_owned())],
        &["--repo", project, "--forge", "gitlab"],
    )
    .await;
    assert!(made.contains(&format!("skipped #{untested}")), "{made}");
    check_made(dir.path(), &source, &base, &format!("group__sub__app-{fixed}"));
}

/// Runs `forgehand eval make` with `args` against the forge in
/// `forge_yaml`, writing `made.jsonl` in `dir`; its stdout and log, which
/// hold no secret of `env`.
async fn make_instances(dir: &Path, forge_yaml: &str, env: &[(&str, String)], args: &[&str]) -> String {
    let config = daemon_rig::write_config(dir, &forgehand_test_support::unique("test-eval"), forge_yaml);
    let out = dir.join("made.jsonl");
    let log = dir.join("make.log");
    let mut all = vec![
        "eval",
        "make",
        "--since",
        "2020-01-01",
        "--test-command",
        "python3 -m unittest {test}",
        "--out",
        out.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let (status, stdout) = daemon_rig::run_to_end(&config, &all, env, &log).await;
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "{stdout}\n{logged}");
    assert!(stdout.contains("1 instance(s)"), "{stdout}");
    for (_, secret) in env {
        assert!(!logged.contains(secret.as_str()) && !stdout.contains(secret.as_str()));
    }
    format!("{stdout}\n{logged}")
}

/// `made.jsonl` in `dir` holds one instance, `id`, that `forgehand eval`
/// reads, based on `base` of `source`, whose reference patch and test
/// patch apply there.
fn check_made(dir: &Path, source: &Path, base: &str, id: &str) {
    let out = dir.join("made.jsonl");
    let made = forgehand::eval::instance::read(&out, None).unwrap();
    assert_eq!(made.len(), 1);
    let instance = &made[0];
    assert_eq!(instance.instance_id, id);
    assert_eq!(instance.base_commit, base);
    assert_eq!(instance.repo, source.to_str().unwrap());
    assert_eq!(instance.fail_to_pass, vec!["test_calc.py"]);
    assert!(instance
        .problem_statement
        .starts_with("add() subtracts\n\nadd(2, 3)"));
    let raw = &lines(&out)[0];
    let check = dir.join("check");
    git(
        dir,
        &["clone", "-q", source.to_str().unwrap(), check.to_str().unwrap()],
    );
    git(&check, &["checkout", "-q", base]);
    for (name, patch) in [
        ("gold.patch", raw["patch"].as_str().unwrap()),
        ("tests.patch", instance.test_patch.as_deref().unwrap()),
    ] {
        std::fs::write(check.join(name), patch).unwrap();
        git(&check, &["apply", name]);
    }
    assert!(std::fs::read_to_string(check.join("calc.py"))
        .unwrap()
        .contains("return a + b"));
    assert!(std::fs::read_to_string(check.join("test_calc.py"))
        .unwrap()
        .contains("def test_add"));
}

#[tokio::test]
async fn a_private_repository_on_the_configured_forge_is_fetched_with_its_token_which_is_kept_nowhere() {
    use forgehand_test_support::fake_github::FakeGitHub;
    use forgehand_test_support::git_http::GitHttpServer;
    use forgehand_test_support::github_world::TOKEN;
    forgehand_test_support::ensure_images().await;
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let (base, _) = source_repository(&source);
    let served = dir.path().join("served");
    std::fs::create_dir_all(served.join("acme")).unwrap();
    git(
        dir.path(),
        &[
            "clone",
            "-q",
            "--bare",
            source.to_str().unwrap(),
            served.join("acme/app.git").to_str().unwrap(),
        ],
    );
    let server = GitHttpServer::start(&served, "x-access-token", TOKEN).await;
    let github = FakeGitHub::start(TOKEN).await;
    let url = server.url("acme/app.git");
    let line = instance("private", Path::new(&url), &base, "python3 -m unittest {test}").to_string();
    let file = dir.path().join("instances.jsonl");
    std::fs::write(&file, line + "\n").unwrap();
    let model = eval_fixture::model().await;
    let config = daemon_rig::write_config(
        dir.path(),
        &forgehand_test_support::unique("test-eval"),
        &format!("github:\n  api_url: \"{}\"\n", github.api_url()),
    );
    let env = vec![
        ("OPENAI_API_KEY", MODEL_KEY.to_owned()),
        ("OPENAI_BASE_URL", model.base_url()),
        ("GITHUB_TOKEN", TOKEN.to_owned()),
    ];
    let out = dir.path().join("out");
    let EvalRun {
        status,
        stdout,
        logged,
    } = run_eval(dir.path(), &config, (&file, &out), &env, &[]).await;
    assert!(status.success(), "{stdout}\n{logged}");
    assert!(stdout.contains("Resolved 1 of 1"), "{stdout}\n{logged}");
    assert!(!logged.contains(TOKEN) && !stdout.contains(TOKEN));
    // Nothing under the output folder (mirror, origin, checkouts, journal) holds the token.
    let found = Command::new("grep")
        .args(["-rl", TOKEN, out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        found.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&found.stdout)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_evaluation_resumes_where_it_stopped_and_runs_no_finished_instance_again() {
    use forgehand_test_support::scripted_model::{call, run, text, TurnModel};
    use std::time::Duration;
    forgehand_test_support::ensure_images().await;
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let (base, _) = source_repository(&source);
    let ids = ["calc-a", "calc-b", "calc-c"];
    let lines_of: Vec<String> = ids
        .iter()
        .map(|id| instance(id, &source, &base, "python3 -m unittest {test}").to_string())
        .collect();
    let file = dir.path().join("instances.jsonl");
    std::fs::write(&file, lines_of.join("\n") + "\n").unwrap();
    // The model thinks 2 s before it commits: time to stop the run mid-instance.
    let model = TurnModel::start(vec![
        (
            call(
                "text_editor_str_replace",
                json!({"path": "/workspace/project/calc.py", "old_str": "return a - b\n\n\ndef sub", "new_str": "return a + b\n\n\ndef sub"}),
            ),
            None,
        ),
        (
            run("git add -A && git commit -qm 'Fix add'"),
            Some(Duration::from_secs(2)),
        ),
        (text("add() adds now."), None),
    ])
    .await;
    let config = daemon_rig::write_config(dir.path(), &forgehand_test_support::unique("test-eval"), "");
    let env = vec![
        ("OPENAI_API_KEY", MODEL_KEY.to_owned()),
        ("OPENAI_BASE_URL", model.base_url()),
    ];
    let out = dir.path().join("out");
    let results = out.join("results.jsonl");
    let args = ["eval", file.to_str().unwrap(), "--out", out.to_str().unwrap()];
    let mut first = daemon_rig::DaemonProcess::start(&config, &args, &env, &dir.path().join("first.log"));
    daemon_rig::wait_until(
        "the first instance to finish",
        Duration::from_secs(120),
        async || std::fs::read_to_string(&results).is_ok_and(|t| t.lines().count() == 1),
        &first.log,
    )
    .await;
    // The second instance is under way now: stop the run.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let status = first.terminate();
    let logged = first.log_text();
    assert!(!status.success(), "{logged}");
    assert!(
        logged.contains("run the same command again to resume"),
        "{logged}"
    );
    assert_eq!(
        lines(&results).len(),
        1,
        "only the finished instance is kept: {logged}"
    );

    let second = run_eval(dir.path(), &config, (&file, &out), &env, &[]).await;
    assert!(second.status.success(), "{}", second.logged);
    assert!(
        second.stdout.contains("Resolved 3 of 3"),
        "{}\n{}",
        second.stdout,
        second.logged
    );
    assert!(second.logged.contains("resuming"), "{}", second.logged);
    let kept: Vec<String> = lines(&results)
        .iter()
        .map(|r| r["instance_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        kept,
        ["calc-a", "calc-b", "calc-c"],
        "each instance once, the first not run again"
    );
}
