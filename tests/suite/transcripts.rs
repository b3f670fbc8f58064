//! The transcript of a run, end to end: a scripted run's every model
//! answer, tool call, command (with its exit code) and edit (as a diff) is
//! in `forgehand tasks show ID`, and in its JSON Lines export, with the
//! secrets the model repeated masked.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::daemon_rig;
use forgehand_test_support::github_world::{World, MODEL_KEY, TOKEN};
use forgehand_test_support::scripted_model::{edit_and_commit, text};
use std::time::Duration;

fn forgehand(world: &World, args: &[&str]) -> String {
    let out = std::process::Command::new(daemon_rig::bin())
        .arg("--config")
        .arg(&world.config)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test]
async fn a_runs_transcript_holds_every_call_command_and_edit_and_no_secret() {
    let mut turns = edit_and_commit(Duration::ZERO);
    turns.pop();
    turns.push((
        text(&format!(
            "Changed the greeting. (The token was {TOKEN}, the key {MODEL_KEY}.)"
        )),
        None,
    ));
    let world = World::new(turns).await;
    let (_, _daemon) = world.deliver_greeting(&[]).await;

    // The labels are set just before the run's end is journalled.
    daemon_rig::wait_until(
        "the run to end",
        Duration::from_secs(30),
        async || !forgehand(&world, &["tasks"]).contains("issue:1  running"),
        &world.log_path(),
    )
    .await;
    let listing = forgehand(&world, &["tasks"]);
    let line = listing
        .lines()
        .find(|l| l.contains("github:acme/app:issue:1"))
        .unwrap_or_else(|| panic!("{listing}"));
    assert!(line.contains("delivered"), "{line}");
    let id = line.split_whitespace().next().unwrap();

    let shown = forgehand(&world, &["tasks", "show", id]);
    assert!(shown.contains("text_editor_str_replace"), "{shown}");
    assert!(
        shown.contains("-Hello\n") && shown.contains("+Hello, world\n"),
        "the edit as a diff:\n{shown}"
    );
    assert!(
        shown.contains("command_executor_execute_command: exit code 0"),
        "{shown}"
    );
    assert!(
        shown.contains("Greet the whole world"),
        "the command's output:\n{shown}"
    );
    assert!(shown.contains("== ended: delivered"), "{shown}");
    assert!(!shown.contains(TOKEN) && !shown.contains(MODEL_KEY), "{shown}");

    let jsonl = forgehand(&world, &["tasks", "show", id, "--jsonl"]);
    let entries: Vec<serde_json::Value> = jsonl.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let kinds: Vec<&str> = entries.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["model", "tool", "model", "tool", "model", "note"],
        "{jsonl}"
    );
    assert_eq!(entries[3]["exit_code"], 0);
    assert!(entries[1]["diff"].as_str().unwrap().contains("+Hello, world"));
    assert!(entries
        .iter()
        .all(|e| e["run"].as_i64() == id.parse().ok() && e["at_ms"].is_i64()));
    assert!(!jsonl.contains(TOKEN) && !jsonl.contains(MODEL_KEY));

    let missing = std::process::Command::new(daemon_rig::bin())
        .arg("--config")
        .arg(&world.config)
        .args(["tasks", "show", "99999"])
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no run 99999"));
}
