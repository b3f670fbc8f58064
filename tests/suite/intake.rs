//! The intake on both forges, with the real forge clients against the fakes:
//! a labelled item whose check fails (its label events answer 502 until the
//! client's retries run out) stays pending and is accepted once it
//! recovers, while the other items go ahead in the same poll; an unchanged
//! GitLab project costs one list request per kind and a refused item
//! nothing after its first refusal; a label taken off forgets the item.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::fake_github;
use forgehand_test_support::fake_gitlab;

use forgehand::config::{Config, Secrets};
use forgehand::daemon::intake::Intake;
use forgehand::forge::github::GitHub;
use forgehand::forge::gitlab::GitLab;
use forgehand::forge::ItemRef;
use std::path::Path;
use std::time::Duration;

const TOKEN: &str = "glpat-intakeTestToken0000000000001";
const LABEL: &str = "coding agent";
/// The forge clients try a failing read six times before giving up.
const ONE_FAILED_CHECK: usize = 6;

fn config(yaml: &str) -> Config {
    Config::from_yaml(yaml, Path::new("t.yaml"), Path::new("."), &|_| None).unwrap()
}

fn numbers(found: &[ItemRef]) -> Vec<u64> {
    let mut n: Vec<u64> = found.iter().map(|i| i.number).collect();
    n.sort_unstable();
    n
}

async fn gitlab_with(fake: &fake_gitlab::FakeGitLab, projects: &[String]) -> (GitLab, Config) {
    let list: Vec<String> = projects.iter().map(|p| format!("\"{p}\"")).collect();
    let config = config(&format!(
        "gitlab:\n  url: \"{}\"\n  projects: [{}]\n",
        fake.url(),
        list.join(", ")
    ));
    let secrets = Secrets::from_lookup(&|v| (v == "GITLAB_TOKEN").then(|| TOKEN.to_owned()));
    (GitLab::connect(&config.gitlab, &secrets).await.unwrap(), config)
}

#[tokio::test]
async fn gitlab_a_failing_check_leaves_the_item_pending_until_it_recovers() {
    let fake = fake_gitlab::FakeGitLab::start(TOKEN).await;
    fake.add_project("acme/app", "http://127.0.0.1:9/x.git");
    fake.add_member("acme/app", "maya", 30);
    let failing = fake.open_issue("acme/app", "maya", "First", "one");
    fake.add_label("acme/app", failing, LABEL, "maya");
    let healthy = fake.open_issue("acme/app", "maya", "Second", "two");
    fake.add_label("acme/app", healthy, LABEL, "maya");
    let (forge, config) = gitlab_with(&fake, &["acme/app".into()]).await;
    let mut intake = Intake::new(config.labels.clone());

    fake.fail(
        &format!("/issues/{failing}/resource_label_events"),
        ONE_FAILED_CHECK,
        502,
    );
    // The healthy item goes ahead in the same poll; the failing one waits.
    assert_eq!(numbers(&intake.poll(&forge).await), vec![healthy]);
    assert!(intake.answered()[0].1.is_err(), "the failed check is reported");
    // The next poll lists it again (the listing did not pass it) and takes it.
    assert_eq!(numbers(&intake.poll(&forge).await), vec![failing]);
    // Accepted once: nothing more until the items change (a claim would).
    assert!(intake.poll(&forge).await.is_empty());
    assert!(intake.poll(&forge).await.is_empty());
    let events = |n: u64| {
        fake.requests()
            .iter()
            .filter(|r| r.contains(&format!("/issues/{n}/resource_label_events")))
            .count()
    };
    assert_eq!(events(failing), ONE_FAILED_CHECK + 1);
    assert_eq!(events(healthy), 1);

    // A change to the item (another label) has it checked again.
    fake.add_label("acme/app", healthy, "other", "maya");
    assert_eq!(numbers(&intake.poll(&forge).await), vec![healthy]);
    assert_eq!(events(healthy), 2);
}

#[tokio::test]
async fn github_a_failing_check_leaves_the_item_pending_until_it_recovers() {
    let fake = fake_github::FakeGitHub::start(TOKEN).await;
    fake.add_repo("acme/app", "http://127.0.0.1:9/x.git", None);
    fake.set_permission("acme/app", "maya", "write");
    let failing = fake.open_issue("acme/app", "maya", "First", "one");
    fake.add_label("acme/app", failing, LABEL, "maya");
    let healthy = fake.open_issue("acme/app", "maya", "Second", "two");
    fake.add_label("acme/app", healthy, LABEL, "maya");
    let config = config(&format!(
        "github:\n  api_url: \"{}\"\n  repositories: [\"acme/app\"]\n",
        fake.api_url()
    ));
    let secrets = Secrets::from_lookup(&|v| (v == "GITHUB_TOKEN").then(|| TOKEN.to_owned()));
    let forge = GitHub::new(&config.github, &secrets, Duration::from_secs(10)).unwrap();
    let mut intake = Intake::new(config.labels.clone());

    fake.fail(&format!("/issues/{failing}/events"), ONE_FAILED_CHECK, 502);
    assert_eq!(numbers(&intake.poll(&forge).await), vec![healthy]);
    // Nothing changed on GitHub (304), but the item is still pending.
    assert_eq!(numbers(&intake.poll(&forge).await), vec![failing]);
    assert!(intake.poll(&forge).await.is_empty());
    let events = |n: u64| {
        fake.requests()
            .iter()
            .filter(|r| r.contains(&format!("/issues/{n}/events")))
            .count()
    };
    assert_eq!(events(failing), ONE_FAILED_CHECK + 1);
    assert_eq!(events(healthy), 1);
}

#[tokio::test]
async fn gitlab_an_unchanged_project_costs_one_list_per_kind_and_a_refusal_nothing_more() {
    let fake = fake_gitlab::FakeGitLab::start(TOKEN).await;
    fake.add_project("acme/app", "http://127.0.0.1:9/x.git");
    fake.add_member("acme/app", "rita", 20);
    fake.add_member("acme/app", "maya", 30);
    let refused = fake.open_issue("acme/app", "rita", "Rewrite", "everything");
    fake.add_label("acme/app", refused, LABEL, "rita");
    let (forge, config) = gitlab_with(&fake, &["acme/app".into()]).await;
    let mut intake = Intake::new(config.labels.clone());

    assert!(
        intake.poll(&forge).await.is_empty(),
        "a Reporter's label starts nothing"
    );
    for _ in 0..3 {
        let before = fake.request_count();
        assert!(intake.poll(&forge).await.is_empty());
        let sent: Vec<String> = fake.requests()[before..].to_vec();
        assert_eq!(sent.len(), 2, "one issue list and one MR list: {sent:?}");
        assert!(sent.iter().all(|r| r.contains("updated_after=")), "{sent:?}");
    }
    // The maintainer labels it again: the change is seen and checked.
    fake.add_label("acme/app", refused, "triaged", "maya");
    let before = fake.request_count();
    assert!(
        intake.poll(&forge).await.is_empty(),
        "rita's label is still the trigger's"
    );
    assert!(fake.requests()[before..]
        .iter()
        .any(|r| r.contains("resource_label_events")));
}
