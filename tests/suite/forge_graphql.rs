//! GraphQL against the fake GitHub, which validates every document and its
//! variables against GitHub's published schema (npm `@octokit/graphql-schema`,
//! see `forgehand_test_support::github_graphql`): what GitHub refuses is
//! refused in GitHub's shape, and every query forgehand sends validates.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand::config::{Config, Secrets};
use forgehand::forge::github::GitHub;
use forgehand::forge::prelude::*;
use forgehand::forge::{ForgeKind, ItemKind, ItemRef, TextEdits};
use forgehand_test_support::fake_github::FakeGitHub;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

const TOKEN: &str = "ghp_forgeGraphqlTestToken0000000000001";
const REPO: &str = "acme/app";

#[tokio::test]
async fn a_query_with_a_field_github_does_not_have_is_refused_in_githubs_shape() {
    let fake = FakeGitHub::start(TOKEN).await;
    fake.add_repo(REPO, "http://127.0.0.1:9/x.git", None);
    let number = fake.open_issue(REPO, "otto", "Title", "Body");
    // `lastEditedOn` is not a field of Issue (GitHub's is `lastEditedAt`).
    let query = "query($owner: String!, $name: String!, $number: Int!) { repository(owner: $owner, name: $name) { issueOrPullRequest(number: $number) { ... on Issue { lastEditedOn } } } }";
    let answer = reqwest::Client::new()
        .post(format!("{}/graphql", fake.api_url()))
        .bearer_auth(TOKEN)
        .json(&json!({"query": query, "variables": {"owner": "acme", "name": "app", "number": number}}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200, "GitHub answers GraphQL errors with 200");
    let body: Value = answer.json().await.unwrap();
    assert!(
        body.get("data").is_none(),
        "a document that does not validate runs nothing: {body}"
    );
    let error = &body["errors"][0];
    assert!(
        error["message"].as_str().unwrap().contains("lastEditedOn"),
        "{body}"
    );
    assert_eq!(error["locations"][0]["line"], 1, "{body}");
    // A variable of the wrong type is refused too, naming it as GitHub does.
    let fixed = query.replace("lastEditedOn", "lastEditedAt");
    let body: Value = reqwest::Client::new()
        .post(format!("{}/graphql", fake.api_url()))
        .bearer_auth(TOKEN)
        .json(&json!({"query": fixed, "variables": {"owner": "acme", "name": "app", "number": "7"}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        body["errors"][0]["message"], "Variable $number of type Int! was provided invalid value",
        "{body}"
    );
    // Both are conformance failures: taken here, they would fail the test.
    let violations = fake.take_violations();
    assert_eq!(violations.len(), 2, "{violations:?}");
    assert!(violations[0].contains("lastEditedOn"), "{violations:?}");
}

#[tokio::test]
async fn forgehands_own_graphql_queries_validate_against_githubs_schema() {
    let fake = FakeGitHub::start(TOKEN).await;
    fake.add_repo(REPO, "http://127.0.0.1:9/x.git", None);
    let issue = fake.open_issue(REPO, "otto", "Title", "Body");
    fake.edit_text(REPO, issue, "Title", "Body, edited");
    let pull = fake.open_pull(REPO, "otto", "Change", "feature");
    fake.review_comment(REPO, pull, "maya", "src/lib.rs", 3, "Rename this");
    fake.review_reply(REPO, pull, 0, "otto", "Why?");
    let yaml = format!("github:\n  api_url: \"{}\"\n", fake.api_url());
    let config = Config::from_yaml(&yaml, Path::new("t.yaml"), Path::new("."), &|_| None).unwrap();
    let secrets = Secrets::from_lookup(&|v| (v == "GITHUB_TOKEN").then(|| TOKEN.to_owned()));
    let forge = GitHub::new(&config.github, &secrets, Duration::from_secs(10)).unwrap();
    let item = |kind, number| ItemRef {
        forge: ForgeKind::GitHub,
        repo: REPO.into(),
        kind,
        number,
    };

    // `lastEditedAt` (the vouching check), the review threads, and resolving one.
    assert!(matches!(
        forge.text_edited_at(&item(ItemKind::Issue, issue)).await.unwrap(),
        TextEdits::LastAt(_)
    ));
    let change = item(ItemKind::Change, pull);
    let threads = forge.review_threads(&change).await.unwrap();
    assert_eq!(threads.len(), 1);
    assert_eq!(threads[0].comments.len(), 2);
    assert!(forge.resolve_thread(&change, &threads[0]).await.unwrap());
    assert!(fake.review_threads(REPO, pull)[0].1, "the thread is resolved");

    let graphql = fake
        .requests()
        .iter()
        .filter(|r| r.starts_with("POST /graphql"))
        .count();
    assert_eq!(graphql, 3, "each of the three went over GraphQL");
    let violations = fake.take_violations();
    assert!(violations.is_empty(), "{violations:#?}");
}
