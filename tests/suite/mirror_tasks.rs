//! Tasks on a repository with more history than `git.history_depth`: the
//! first task's sandbox gets a shallow `.git` of the last commits, a task
//! after the default branch moved fetches only the new objects and works on
//! the new head, and both deliver from the shallow start; a daemon killed
//! mid-fetch leaves a mirror the next start repairs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::daemon_rig::wait_until;
use forgehand_test_support::git_http;
use forgehand_test_support::github_world::{World, DONE, REPO};
use forgehand_test_support::scripted_model::{call, edit_and_commit, Reply};
use serde_json::json;
use std::time::Duration;

/// A look at the sandbox's history, then the usual edit and commit.
fn look_then_work() -> Vec<(Reply, Option<Duration>)> {
    let mut turns = vec![(
        call(
            "command_executor_execute_command",
            json!({"command": "echo \"commits=$(git rev-list --count HEAD) shallow=$(git rev-parse --is-shallow-repository) head=$(git log -1 --format=%s)\""}),
        ),
        None,
    )];
    turns.extend(edit_and_commit(Duration::ZERO));
    turns
}

/// The `objects=N` of each "fetched into the mirror" log line.
fn fetched_objects(log: &str) -> Vec<u64> {
    log.lines()
        .filter(|l| l.contains("fetched into the mirror"))
        .filter_map(|l| l.split("objects=").nth(1))
        .filter_map(|rest| rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_start_shallow_fetch_only_new_objects_and_work_on_the_moved_head() {
    let mut turns = look_then_work();
    turns.extend(look_then_work());
    let files = [("greet.py", "print('Hello')\n"), ("README.md", "# app\n")];
    let world = World::with_repository(turns, &files, "git:\n  history_depth: 3\n").await;
    for n in 1..=10 {
        git_http::push_commit(
            &world.bare,
            "main",
            "CHANGES.md",
            &format!("change {n}\n"),
            &format!("change {n}"),
        );
    }
    let gh = &world.github;
    let first = gh.open_issue(REPO, "maya", "Greet the world", "Say hello to the world.");
    gh.add_label(REPO, first, "coding agent", "maya");
    let mut daemon = world.start();
    world.wait_for_end(first).await;
    assert_eq!(
        gh.issue(REPO, first).labels,
        vec![DONE.to_owned()],
        "{}",
        std::fs::read_to_string(world.log_path()).unwrap()
    );

    git_http::push_commit(&world.bare, "main", "CHANGES.md", "moved\n", "moved on main");
    let second = gh.open_issue(REPO, "maya", "Greet the world again", "Say hello to the world.");
    gh.add_label(REPO, second, "coding agent", "maya");
    world.wait_for_end(second).await;
    assert!(daemon.terminate().success());
    assert_eq!(
        gh.issue(REPO, second).labels,
        vec![DONE.to_owned()],
        "{:?}",
        gh.issue(REPO, second).comments
    );

    // What each sandbox saw of its history.
    let seen: Vec<String> = world
        .model
        .requests()
        .await
        .iter()
        .map(|r| r.to_string())
        .flat_map(|r| {
            // The command's output, not its text: a count follows.
            r.split("commits=")
                .skip(1)
                .filter(|s| s.starts_with(|c: char| c.is_ascii_digit()))
                .map(|s| s.chars().take(60).collect::<String>())
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(seen[0].starts_with("3 shallow=true head=change 10"), "{seen:?}");
    assert!(
        seen.iter()
            .any(|s| s.starts_with("3 shallow=true head=moved on main")),
        "{seen:?}"
    );

    // Each task branch was pushed on top of the head its task started from.
    assert_eq!(
        git_http::log(&world.bare, &format!("forgehand/issue-{first}"))[..2],
        ["Greet the whole world", "change 10"]
    );
    assert_eq!(
        git_http::log(&world.bare, &format!("forgehand/issue-{second}"))[..2],
        ["Greet the whole world", "moved on main"]
    );

    // The second task fetched the one new commit, not the history again.
    let log = std::fs::read_to_string(world.log_path()).unwrap();
    let fetched = fetched_objects(&log);
    assert!(fetched.len() >= 2, "{fetched:?}");
    assert!(
        fetched[0] >= 6,
        "the first fetch brings the last commits: {fetched:?}"
    );
    assert!(
        fetched[1..].iter().all(|&n| n <= 3),
        "later fetches bring only new objects: {fetched:?}\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_killed_mid_fetch_leaves_a_mirror_the_next_start_repairs() {
    let files = [("greet.py", "print('Hello')\n"), ("README.md", "# app\n")];
    let world = World::with_repository(edit_and_commit(Duration::ZERO), &files, "").await;
    for n in 1..=30 {
        git_http::push_commit(
            &world.bare,
            "main",
            &format!("note-{n}.md"),
            &noise(n as u64, 20_000),
            &format!("note {n}"),
        );
    }
    let gh = &world.github;
    let issue = gh.open_issue(REPO, "maya", "Greet the world", "Say hello to the world.");
    gh.add_label(REPO, issue, "coding agent", "maya");
    let log = world.log_path();

    // Killed while the mirror's first fetch has half its pack.
    world.git.hold_packs(true);
    let mut daemon = world.start();
    wait_until(
        "a fetch stopped half-way",
        Duration::from_secs(60),
        async || world.git.packs_stopped() > 0,
        &log,
    )
    .await;
    daemon.kill9();
    world.git.hold_packs(false);
    let mirrors = world.dir.path().join("state/mirrors");
    assert!(mirrors.is_dir(), "the killed fetch had begun the mirror");

    let mut daemon = world.start();
    world.wait_for_end(issue).await;
    assert!(daemon.terminate().success());
    assert_eq!(
        gh.issue(REPO, issue).labels,
        vec![DONE.to_owned()],
        "{}",
        std::fs::read_to_string(&log).unwrap()
    );
    assert_eq!(
        git_http::log(&world.bare, &format!("forgehand/issue-{issue}"))[..2],
        ["Greet the whole world", "note 30"]
    );
    // Nothing of the killed fetch is left in the mirror.
    let mirror = std::fs::read_dir(&mirrors)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "git"))
        .expect("the mirror");
    let leftovers: Vec<String> = std::fs::read_dir(mirror.join("objects/pack"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with("pack-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// `len` characters that do not compress, the same for the same `seed`:
/// the pack is mostly objects, so half of it holds some.
fn noise(seed: u64, len: usize) -> String {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            char::from(b"0123456789abcdef"[(state >> 60) as usize])
        })
        .collect()
}
