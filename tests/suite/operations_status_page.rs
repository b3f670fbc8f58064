//! The status page in a real browser: headless Chromium (Debian's package,
//! installed by scripts/dev-env.sh) renders it to a PNG, kept at
//! `target/status-page.png` for a person to look at. The test checks the
//! browser rendered a full page of it, and that every task row links the
//! transcript of its run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand::daemon::http::{render_status, SpendRow, TaskRow};
use forgehand::journal::{Phase, TaskRecord, Waiting};
use forgehand::task::board::LiveTask;
use std::time::{Duration, SystemTime};

fn ended(n: u64, phase: Phase, url: Option<&str>, outcome: &str, ago: i64, now: i64) -> TaskRecord {
    TaskRecord {
        key: format!("github:acme/app:issue:{n}"),
        phase,
        attempts: 1,
        branch: Some(format!("forgehand/issue-{n}")),
        comment_id: None,
        container_id: None,
        change_url: url.map(str::to_owned),
        outcome: Some(outcome.into()),
        updated_at: now - ago,
    }
}

#[test]
fn the_status_page_renders_in_headless_chromium() {
    let now = SystemTime::now();
    let secs = now.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs() as i64;
    let live = vec![
        LiveTask {
            name: "acme/app#41".into(),
            web_url: "https://github.example/acme/app/issues/41".into(),
            status: "Working: the model is making the change".into(),
            started: now - Duration::from_secs(754),
            tokens: 182_400,
            cost: 0.4127,
        },
        LiveTask {
            name: "acme/platform/api!7".into(),
            web_url: "https://gitlab.example/acme/platform/api/-/merge_requests/7".into(),
            status: "Planning: round 2: revisions (9 of about 18 model calls done)".into(),
            started: now - Duration::from_secs(95),
            tokens: 64_210,
            cost: 0.0912,
        },
    ];
    let done = vec![
        ended(
            40,
            Phase::Done,
            Some("https://github.example/acme/app/pull/52"),
            "draft PR opened",
            600,
            secs,
        ),
        ended(
            38,
            Phase::Failed,
            None,
            "the model made no change and stopped after 50 steps (agent.max_steps)",
            7200,
            secs,
        ),
        ended(
            35,
            Phase::Stopped,
            None,
            "the processing label was removed",
            90_000,
            secs,
        ),
    ];
    // The third ended task's runs were pruned (daemon.transcript_retention).
    let live: Vec<TaskRow<LiveTask>> = live
        .into_iter()
        .zip([57, 58])
        .map(|(task, run)| TaskRow { task, run: Some(run) })
        .collect();
    let done: Vec<TaskRow<TaskRecord>> = done
        .into_iter()
        .zip([Some(52), Some(50), None])
        .map(|(task, run)| TaskRow { task, run })
        .collect();
    let now_secs = now.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs() as i64;
    let waiting = [Waiting {
        key: "github:acme/app:issue:44".into(),
        on: "the checks of 0123abcd: 1 running (test)".into(),
        since: now_secs - 600,
    }];
    let html = render_status(
        "forgehand-prod",
        &live,
        &waiting,
        &done,
        &[("github".into(), 4_873), ("gitlab".into(), 1_996)],
        &[
            SpendRow {
                repository: "acme/api".into(),
                model: "gpt-5.6".into(),
                today: 1.25,
                month: 31.5,
            },
            SpendRow {
                repository: "acme/web".into(),
                model: "claude-opus-5-5".into(),
                today: 0.0,
                month: 4.0,
            },
        ],
        now,
    );
    forgehand_test_support::browser::screenshot(&html, "status-page", 1280, 900);
    assert!(html.contains("<h2>In flight (2)</h2>") && html.contains("12 min"));
    assert!(
        html.contains("<h2>Waiting (1)</h2>")
            && html.contains("<tr><td>acme/app#44</td><td>the checks of 0123abcd: 1 running (test)</td><td class=\"when\">10 min ago</td></tr>"),
        "{html}"
    );
    for run in [57, 58, 52, 50] {
        assert!(
            html.contains(&format!("<a href=\"/tasks/{run}\">run {run}</a>")),
            "run {run} in {html}"
        );
    }
    let rows_of = |name: &str| html.lines().filter(|l| l.contains(name)).count();
    assert_eq!(rows_of("href=\"/tasks/"), 4, "{html}");
    let pruned = html.lines().find(|l| l.contains("acme/app#35")).unwrap();
    assert!(!pruned.contains("/tasks/"), "{pruned}");
    assert!(html.contains(
        "<td>acme/api</td><td>gpt-5.6</td><td class=\"num\">$1.25</td><td class=\"num\">$31.50</td>"
    ));
}
