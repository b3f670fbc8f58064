//! The GitHub forge against the fake GitHub: polling cost with conditional
//! requests, rate limits, pagination of visible repositories, and GitHub App
//! authentication.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::fake_github;

use fake_github::FakeGitHub;
use forgehand::config::{Config, Secrets};
use forgehand::daemon::intake::Intake;
use forgehand::forge::github::GitHub;
use forgehand::forge::prelude::*;
use forgehand::forge::{ForgeError, Poll};
use std::path::Path;
use std::time::Duration;

const TOKEN: &str = "ghp_forgeTestToken0000000000000000001";

fn config(api: &str, repos: &[String], extra: &str) -> Config {
    let list: Vec<String> = repos.iter().map(|r| format!("\"{r}\"")).collect();
    let yaml = format!(
        "github:\n  api_url: \"{api}\"\n  repositories: [{}]\n{extra}",
        list.join(", ")
    );
    Config::from_yaml(&yaml, Path::new("t.yaml"), Path::new("."), &|_| None).unwrap()
}

fn token_secrets() -> Secrets {
    Secrets::from_lookup(&|v| (v == "GITHUB_TOKEN").then(|| TOKEN.to_owned()))
}

#[tokio::test]
async fn polling_100_unchanged_repositories_costs_no_rate_limit_after_the_first_cycle() {
    let github = FakeGitHub::start(TOKEN).await;
    let repos: Vec<String> = (0..100).map(|i| format!("acme/repo{i:03}")).collect();
    for r in &repos {
        github.add_repo(r, "http://127.0.0.1:9/x.git", None);
    }
    let labelled = github.open_issue("acme/repo042", "maya", "Fix", "it");
    github.add_label("acme/repo042", labelled, "coding agent", "maya");
    github.set_permission("acme/repo042", "maya", "write");
    let config = config(&github.api_url(), &repos, "");
    let forge = GitHub::new(&config.github, &token_secrets(), Duration::from_secs(10)).unwrap();
    let mut intake = Intake::new(config.labels.clone());

    let first = intake.poll(&forge).await;
    assert_eq!(
        first.len(),
        1,
        "the labelled issue is found and its labeller may trigger"
    );
    let after_first = github.rate_used();
    assert!(after_first >= 100);
    for _ in 0..3 {
        intake.poll(&forge).await;
    }
    assert_eq!(github.rate_used(), after_first, "304 answers cost nothing");
    let conditional = github
        .requests()
        .iter()
        .filter(|r| r.starts_with("GET /repos/acme/repo007/issues?"))
        .count();
    assert_eq!(conditional, 4, "one request per repository per cycle");

    // A change is seen at the next cycle, for one unit.
    let other = github.open_issue("acme/repo007", "maya", "More", "work");
    github.set_permission("acme/repo007", "maya", "write");
    github.add_label("acme/repo007", other, "coding agent", "maya");
    let seen = intake.poll(&forge).await;
    assert!(seen.iter().any(|i| i.repo == "acme/repo007"), "{seen:?}");
}

#[tokio::test]
async fn a_rate_limited_answer_pauses_requests_for_the_time_github_asks() {
    let github = FakeGitHub::start(TOKEN).await;
    github.add_repo("acme/app", "http://127.0.0.1:9/x.git", None);
    let config = config(&github.api_url(), &["acme/app".into()], "");
    let forge = GitHub::new(&config.github, &token_secrets(), Duration::from_secs(10)).unwrap();
    github.rate_limit_next(120);
    let err = forge
        .poll_labelled("acme/app", "coding agent", None)
        .await
        .unwrap_err();
    assert!(matches!(err, ForgeError::RateLimited { .. }), "{err}");
    assert!(err.is_retryable());
    let wait = err.retry_after().unwrap();
    assert!(
        wait > Duration::from_secs(100) && wait <= Duration::from_secs(120),
        "{wait:?}"
    );
    let sent = github.requests().len();
    // The next call waits it out without sending anything.
    let again = forge
        .poll_labelled("acme/app", "coding agent", None)
        .await
        .unwrap_err();
    assert!(matches!(again, ForgeError::RateLimited { .. }));
    assert_eq!(github.requests().len(), sent);
}

#[tokio::test]
async fn all_visible_repositories_are_listed_across_pages() {
    let github = FakeGitHub::start(TOKEN).await;
    for i in 0..130 {
        github.add_repo(&format!("acme/r{i:03}"), "http://127.0.0.1:9/x.git", None);
    }
    let config = config(
        &github.api_url(),
        &["acme/r005".into()],
        "  all_repositories: true\n",
    );
    let forge = GitHub::new(&config.github, &token_secrets(), Duration::from_secs(10)).unwrap();
    let repos = forge.watched_repositories().await.unwrap();
    assert_eq!(repos.len(), 130, "configured ones are not listed twice");
    assert_eq!(
        github
            .requests()
            .iter()
            .filter(|r| r.starts_with("GET /user/repos"))
            .count(),
        2
    );
}

#[tokio::test]
async fn bad_credentials_are_an_auth_error_that_names_the_token_not_its_value() {
    let github = FakeGitHub::start(TOKEN).await;
    github.add_repo("acme/app", "http://127.0.0.1:9/x.git", None);
    let config = config(&github.api_url(), &["acme/app".into()], "");
    let wrong = Secrets::from_lookup(&|v| (v == "GITHUB_TOKEN").then(|| "ghp_wrongwrongwrong".to_owned()));
    let forge = GitHub::new(&config.github, &wrong, Duration::from_secs(10)).unwrap();
    let err = forge.repository("acme/app").await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, ForgeError::Auth { .. }), "{text}");
    assert!(
        text.contains("GITHUB_TOKEN") && !text.contains("ghp_wrong"),
        "{text}"
    );
    let missing = GitHub::new(&config.github, &Secrets::default(), Duration::from_secs(10))
        .err()
        .unwrap();
    assert!(
        missing.to_string().contains("GITHUB_TOKEN is not set"),
        "{missing}"
    );
}

#[tokio::test]
async fn a_github_app_installation_authenticates_the_api_and_git() {
    let github = FakeGitHub::start("ghp_unused_personal_token_000000000").await;
    github.add_repo("acme/app", "http://127.0.0.1:9/x.git", None);
    github.enable_app(77, "ghs_installationTokenMinted000000001");
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("app.pem");
    let made = std::process::Command::new("openssl")
        .args(["genrsa", "-traditional", "-out"])
        .arg(&key)
        .arg("2048")
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let pem = std::fs::read_to_string(&key).unwrap();
    let config = config(
        &github.api_url(),
        &["acme/app".into()],
        "  app_id: 4242\n  installation_id: 77\n",
    );
    let secrets = Secrets::from_lookup(&|v| (v == "GITHUB_APP_PRIVATE_KEY").then(|| pem.clone()));
    let forge = GitHub::new(&config.github, &secrets, Duration::from_secs(10)).unwrap();
    let info = forge.repository("acme/app").await.unwrap();
    assert_eq!(info.default_branch, "main");
    let creds = forge.git_credentials().await.unwrap();
    assert_eq!(creds.username, "x-access-token");
    assert_eq!(creds.token.expose(), "ghs_installationTokenMinted000000001");
    assert!(github
        .requests()
        .iter()
        .any(|r| r == "POST /app/installations/77/access_tokens"));
    assert!(matches!(
        forge
            .poll_labelled("acme/app", "coding agent", None)
            .await
            .unwrap(),
        Poll::All(_)
    ));

    let no_key = GitHub::new(&config.github, &Secrets::default(), Duration::from_secs(10))
        .err()
        .unwrap();
    assert!(no_key.to_string().contains("GITHUB_APP_PRIVATE_KEY"), "{no_key}");
}
