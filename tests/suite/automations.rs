//! Scheduled automations end to end: the real daemon, its clock driven by
//! the test through `FORGEHAND_TEST_CLOCK_FILE`, a schedule of every
//! minute. On the fake GitHub and the fake GitLab: one issue per tick,
//! labelled with the trigger label, none while the last one is open, one
//! catch-up after a gap, nothing doubled by a restart. Two replicas
//! sharing the fake Lease API server: each tick opens one issue, never two.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::daemon_rig::{self, wait_until, DaemonProcess};
use forgehand_test_support::fake_kube::FakeKube;
use forgehand_test_support::github_world::{World, REPO, TOKEN};
use forgehand_test_support::gitlab_world::{GitLabWorld, PROJECT};
use forgehand_test_support::kubeconfig;
use forgehand_test_support::scripted_model::Reply;
use std::path::{Path, PathBuf};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

/// The model is never asked: the issues are opened by forgehand's own
/// account, which the fakes do not let trigger a task.
fn no_turns() -> Vec<(Reply, Option<Duration>)> {
    vec![(Reply::Text("Nothing to do.".into()), None)]
}

/// An automation of every minute in `repo`, with one extra label.
fn automation_yaml(repo: &str) -> String {
    format!(
        "automations:\n  - name: \"minutely-chore\"\n    schedule: \"* * * * *\"\n    timezone: \"Europe/Berlin\"\n    repositories: [\"{repo}\"]\n    title: \"Tidy the changelog\"\n    instructions: \"Sort the changelog's entries.\"\n    labels: [\"chore\"]\n    starting_deadline: \"30m\"\n"
    )
}

/// The test's clock: a file the daemon reads the time from.
struct TestClock(PathBuf);

impl TestClock {
    fn new(dir: &Path, at: &str) -> TestClock {
        let clock = TestClock(dir.join("clock"));
        clock.set(at);
        clock
    }

    fn set(&self, at: &str) {
        std::fs::write(&self.0, at).unwrap();
    }

    fn env(&self) -> (&'static str, String) {
        ("FORGEHAND_TEST_CLOCK_FILE", self.0.display().to_string())
    }
}

fn count(log: &Path, needle: &str) -> usize {
    count_all(log, &[needle])
}

/// The log lines holding every one of `needles`.
fn count_all(log: &Path, needles: &[&str]) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| needles.iter().all(|n| l.contains(n)))
        .count()
}

/// How many looks at the time `at` the log shows.
fn looks_at(log: &Path, at: &str) -> usize {
    count_all(log, &["looked at the automations", &format!("now={at}")])
}

/// A GitHub world whose repository holds a changelog, with `yaml`.
async fn github_world(yaml: &str) -> World {
    World::with_repository(no_turns(), &[("CHANGELOG.md", "# Changes\n")], yaml).await
}

/// The GitHub world's daemon on the test's clock, once it counts from now.
async fn start_on_clock(world: &World, clock: &TestClock) -> DaemonProcess {
    let mut env = world.env();
    env.push(clock.env());
    let daemon = DaemonProcess::start(&world.config, &["run"], &env, &world.log_path());
    counting_from_now(&world.log_path(), 1).await;
    daemon
}

/// Waits until `daemons` daemons saw the automation and count its times from now.
async fn counting_from_now(log: &Path, daemons: usize) {
    let line = "automation scheduled; its times count from now";
    wait_until(
        "the automation counting from now",
        WAIT,
        async || count(log, line) == daemons,
        log,
    )
    .await;
}

/// Sets the clock to `at`, then waits until the daemon looked at that time.
async fn tick(clock: &TestClock, at: &str, log: &Path) {
    clock.set(at);
    wait_until(
        &format!("a look at {at}"),
        WAIT,
        async || looks_at(log, at) > 0,
        log,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_github_one_issue_per_tick_none_while_open_one_catch_up_and_no_double_after_a_restart() {
    let world = github_world(&automation_yaml(REPO)).await;
    let gh = &world.github;
    let log = world.log_path();
    let clock = TestClock::new(world.dir.path(), "2026-12-08T10:00:30Z");
    let mut daemon = start_on_clock(&world, &clock).await;
    assert!(gh.issues_by_bot(REPO).is_empty(), "nothing before the first time");

    // 10:01: the first time. One issue, labelled for the intake.
    tick(&clock, "2026-12-08T10:01:00Z", &log).await;
    let issues = gh.issues_by_bot(REPO);
    assert_eq!(issues.len(), 1, "{}", daemon.log_text());
    let first = &issues[0];
    assert_eq!(first.title, "Tidy the changelog");
    assert!(
        first.labels.iter().any(|l| l == "coding agent"),
        "{:?}",
        first.labels
    );
    assert!(first.labels.iter().any(|l| l == "chore"), "{:?}", first.labels);
    assert!(
        first.body.starts_with("Sort the changelog's entries."),
        "{}",
        first.body
    );
    assert!(
        first
            .body
            .contains("<!-- forgehand-automation: minutely-chore slot: 2026-12-08T10:01:00Z -->"),
        "{}",
        first.body
    );
    assert!(first.body.contains("for 2026-12-08 11:01 CET"), "{}", first.body);

    // 10:02 while #1 is open: skipped, and said so.
    tick(&clock, "2026-12-08T10:02:00Z", &log).await;
    assert_eq!(gh.issues_by_bot(REPO).len(), 1);
    let skipped = format!("skipped: its previous issue #{} is still open", first.number);
    assert_eq!(count(&log, &skipped), 1, "{}", daemon.log_text());

    // #1 closed: 10:03 opens the next one.
    gh.close_issue(REPO, first.number, "maya");
    tick(&clock, "2026-12-08T10:03:00Z", &log).await;
    assert_eq!(gh.issues_by_bot(REPO).len(), 2, "{}", daemon.log_text());

    // A gap of four times (10:04 to 10:07) with the issue closed: one
    // catch-up, for the latest of them.
    for issue in gh.issues_by_bot(REPO) {
        gh.close_issue(REPO, issue.number, "maya");
    }
    tick(&clock, "2026-12-08T10:07:30Z", &log).await;
    let issues = gh.issues_by_bot(REPO);
    assert_eq!(issues.len(), 3, "{}", daemon.log_text());
    let caught = issues.iter().max_by_key(|i| i.number).unwrap();
    assert!(
        caught.body.contains("slot: 2026-12-08T10:07:00Z"),
        "{}",
        caught.body
    );
    assert_eq!(count(&log, "caught up a missed run"), 1);

    // Killed and started again at the same time: 10:07 is not opened again.
    daemon.kill9();
    gh.close_issue(REPO, caught.number, "maya");
    let before = looks_at(&log, "2026-12-08T10:07:30Z");
    let mut env = world.env();
    env.push(clock.env());
    let mut daemon = DaemonProcess::start(&world.config, &["run"], &env, &log);
    wait_until(
        "the restarted daemon's look at 10:07:30",
        WAIT,
        async || looks_at(&log, "2026-12-08T10:07:30Z") > before,
        &log,
    )
    .await;
    assert_eq!(gh.issues_by_bot(REPO).len(), 3, "{}", daemon.log_text());
    tick(&clock, "2026-12-08T10:08:00Z", &log).await;
    assert_eq!(gh.issues_by_bot(REPO).len(), 4, "{}", daemon.log_text());

    // `forgehand automations list`: the next times in Berlin and UTC, and the last run.
    let out = std::process::Command::new(daemon_rig::bin())
        .arg("--config")
        .arg(&world.config)
        .args(["automations", "list"])
        .env(clock.env().0, clock.env().1)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let listed = String::from_utf8(out.stdout).unwrap();
    assert!(
        listed.contains("minutely-chore  \"Tidy the changelog\"  schedule \"* * * * *\" in Europe/Berlin"),
        "{listed}"
    );
    assert!(
        listed.contains("2026-12-08 11:09 CET  (2026-12-08 10:09 UTC)"),
        "{listed}"
    );
    assert!(listed.contains("github:acme/app"), "{listed}");
    assert!(
        listed.contains("last fired for 2026-12-08T10:08:00Z: #4"),
        "{listed}"
    );
    daemon.kill9();
    assert!(!daemon.log_text().contains(TOKEN), "the token is never logged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_gitlab_one_issue_per_tick_none_while_open_and_one_catch_up() {
    let world = GitLabWorld::new(
        no_turns(),
        &[("CHANGELOG.md", "# Changes\n")],
        &automation_yaml(PROJECT),
    )
    .await;
    let gl = &world.gitlab;
    let log = world.log.clone();
    let clock = TestClock::new(world.dir.path(), "2026-12-08T10:00:30Z");
    let mut daemon = world.start_with(&[clock.env()]);
    counting_from_now(&log, 1).await;

    tick(&clock, "2026-12-08T10:01:00Z", &log).await;
    let issues = gl.issues_by_bot(PROJECT);
    assert_eq!(issues.len(), 1, "{}", daemon.log_text());
    assert!(
        issues[0].labels.iter().any(|l| l == "coding agent"),
        "{:?}",
        issues[0].labels
    );
    assert!(
        issues[0].labels.iter().any(|l| l == "chore"),
        "{:?}",
        issues[0].labels
    );
    assert!(issues[0].description.contains("slot: 2026-12-08T10:01:00Z"));

    tick(&clock, "2026-12-08T10:02:00Z", &log).await;
    assert_eq!(gl.issues_by_bot(PROJECT).len(), 1);
    assert_eq!(
        count(
            &log,
            &format!("skipped: its previous issue #{} is still open", issues[0].iid)
        ),
        1
    );

    gl.close_issue(PROJECT, issues[0].iid);
    tick(&clock, "2026-12-08T10:03:00Z", &log).await;
    assert_eq!(gl.issues_by_bot(PROJECT).len(), 2, "{}", daemon.log_text());

    for issue in gl.issues_by_bot(PROJECT) {
        gl.close_issue(PROJECT, issue.iid);
    }
    tick(&clock, "2026-12-08T10:07:30Z", &log).await;
    let issues = gl.issues_by_bot(PROJECT);
    assert_eq!(issues.len(), 3, "{}", daemon.log_text());
    assert!(issues
        .iter()
        .any(|i| i.description.contains("slot: 2026-12-08T10:07:00Z")));
    assert_eq!(count(&log, "caught up a missed run"), 1);
    let violations = gl.take_violations();
    assert!(violations.is_empty(), "{violations:?}");
    daemon.kill9();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_open_one_issue_per_tick() {
    let kube = FakeKube::start().await;
    let yaml = format!("{}{}", super::cluster_replicas::CLUSTER, automation_yaml(REPO));
    let world = github_world(&yaml).await;
    let gh = &world.github;
    let log = world.log_path();
    let kube_config = kubeconfig::write_kubeconfig(world.dir.path(), &kube.url());
    let clock = TestClock::new(world.dir.path(), "2026-12-08T10:00:30Z");
    let mut one = super::cluster_replicas::replica_with(&world, &kube_config, 1, &[clock.env()]);
    let mut two = super::cluster_replicas::replica_with(&world, &kube_config, 2, &[clock.env()]);
    counting_from_now(&log, 2).await;

    for (n, at) in [
        "2026-12-08T10:01:00Z",
        "2026-12-08T10:02:00Z",
        "2026-12-08T10:03:00Z",
    ]
    .into_iter()
    .enumerate()
    {
        clock.set(at);
        // Both replicas decided this time: one opened, the other left it.
        let slot = format!("slot={at}");
        wait_until(
            &format!("both replicas deciding {at}"),
            WAIT,
            async || {
                count_all(&log, &[&slot, "fired: opened issue"])
                    + count_all(&log, &[&slot, "another replica runs this time"])
                    >= 2
            },
            &log,
        )
        .await;
        let issues = gh.issues_by_bot(REPO);
        assert_eq!(issues.len(), n + 1, "one issue per tick\n{}", one.log_text());
        assert_eq!(
            count_all(&log, &[&slot, "fired: opened issue"]),
            1,
            "one replica opened {at}"
        );
        assert_eq!(
            count_all(&log, &[&slot, "another replica runs this time"]),
            1,
            "the other replica left {at} to it"
        );
        for issue in issues {
            gh.close_issue(REPO, issue.number, "maya");
        }
    }
    let leases = kube.leases();
    assert!(
        leases
            .iter()
            .any(|l| l["metadata"]["annotations"]["io.forgehand/task"]
                .as_str()
                .is_some_and(|t| t.ends_with(&format!("@{}", chrono_secs("2026-12-08T10:03:00Z"))))),
        "the automation's Lease holds the last time: {leases:?}"
    );
    one.kill9();
    two.kill9();
}

fn chrono_secs(at: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(at).unwrap().timestamp()
}

/// Where forgehand's account may write (as it must, to push), the issue
/// an automation opened is claimed and worked by the usual intake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_usual_intake_works_the_issue_an_automation_opened() {
    let world = github_world(&automation_yaml(REPO)).await;
    let gh = &world.github;
    gh.set_permission(REPO, forgehand_test_support::fake_github::BOT, "write");
    let log = world.log_path();
    let clock = TestClock::new(world.dir.path(), "2026-12-08T10:00:30Z");
    let mut daemon = start_on_clock(&world, &clock).await;
    tick(&clock, "2026-12-08T10:01:00Z", &log).await;
    let issue = gh.issues_by_bot(REPO)[0].number;
    world.wait_for_end(issue).await;
    assert_eq!(
        count_all(&log, &["starting (new)", &format!("task={REPO}#{issue}")]),
        1,
        "{}",
        daemon.log_text()
    );
    // The model was asked with the automation's instructions.
    let requests = world.model.requests().await;
    assert!(
        requests
            .iter()
            .any(|r| r.to_string().contains("Sort the changelog's entries.")),
        "the instructions reach the model"
    );
    daemon.terminate();
}
