//! Who applied a label and when, and when an item's text was last edited,
//! on both forges (GitHub: label events, GraphQL `lastEditedAt` and
//! `renamed` events; GitLab: resource label events and the system notes it
//! writes for title and description changes): what decides whether a
//! maintainer's label vouches for an outsider's text.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::fake_github;
use forgehand_test_support::fake_gitlab;

use forgehand::config::{Config, Secrets};
use forgehand::forge::github::GitHub;
use forgehand::forge::gitlab::GitLab;
use forgehand::forge::{ForgeKind, Intake, ItemKind, ItemRef, TextEdits, Timestamp};
use std::path::Path;
use std::time::Duration;

const TOKEN: &str = "ghp_forgeEditsTestToken00000000000001";

fn config(yaml: &str) -> Config {
    Config::from_yaml(yaml, Path::new("t.yaml"), Path::new("."), &|_| None).unwrap()
}

fn item(forge: ForgeKind, repo: &str, number: u64) -> ItemRef {
    ItemRef {
        forge,
        repo: repo.into(),
        kind: ItemKind::Issue,
        number,
    }
}

/// Maya's label is found with its time; the text was never edited until
/// `edit` runs, and then its edit is later than the label. Returns the edit's time.
async fn labelled_then_edited(forge: &dyn Intake, issue: &ItemRef, edit: impl FnOnce()) -> Timestamp {
    let labelled = forge.label_applied(issue, "coding agent").await.unwrap().unwrap();
    assert_eq!(labelled.by, "maya");
    let at = labelled.at.expect("the event's time");
    assert_eq!(forge.label_applied(issue, "other").await.unwrap(), None);
    assert_eq!(forge.text_edited_at(issue).await.unwrap(), TextEdits::Never);
    edit();
    let edited = last_edit(forge, issue).await;
    assert!(edited > at);
    edited
}

async fn last_edit(forge: &dyn Intake, issue: &ItemRef) -> Timestamp {
    match forge.text_edited_at(issue).await.unwrap() {
        TextEdits::LastAt(at) => at,
        other => panic!("expected an edit time, got {other:?}"),
    }
}

#[tokio::test]
async fn github_says_who_labelled_when_and_when_the_text_was_edited() {
    let fake = fake_github::FakeGitHub::start(TOKEN).await;
    fake.add_repo("acme/app", "http://127.0.0.1:9/x.git", None);
    let number = fake.open_issue("acme/app", "otto", "Title", "Body");
    fake.add_label("acme/app", number, "coding agent", "maya");
    let config = config(&format!("github:\n  api_url: \"{}\"\n", fake.api_url()));
    let secrets = Secrets::from_lookup(&|v| (v == "GITHUB_TOKEN").then(|| TOKEN.to_owned()));
    let forge = GitHub::new(&config.github, &secrets, Duration::from_secs(10)).unwrap();
    let issue = item(ForgeKind::GitHub, "acme/app", number);

    // A body edit shows only in GraphQL. GitHub's times are whole
    // seconds: each step comes a second later, as a person's would.
    fake.next_second().await;
    let edited = labelled_then_edited(&forge, &issue, || {
        fake.edit_text("acme/app", number, "Title", "Body, edited")
    })
    .await;
    assert!(fake.requests().iter().any(|r| r.starts_with("POST /graphql")));

    // A rename is an event; it counts as an edit of the text too.
    fake.next_second().await;
    fake.edit_text("acme/app", number, "New title", "Body, edited");
    assert!(last_edit(&forge, &issue).await > edited);

    // An answer without the item says nothing: unknown, never "never edited".
    fake.hide_graphql_items();
    assert!(matches!(
        forge.text_edited_at(&issue).await.unwrap(),
        TextEdits::Unknown(why) if why.contains("does not include the item")
    ));

    // An unknown repository is a clear error, not "never edited".
    let missing = item(ForgeKind::GitHub, "acme/none", 1);
    let err = forge.text_edited_at(&missing).await.unwrap_err().to_string();
    assert!(err.contains("Could not resolve"), "{err}");
}

#[tokio::test]
async fn gitlab_says_who_labelled_when_and_when_the_text_was_edited() {
    let fake = fake_gitlab::FakeGitLab::start(TOKEN).await;
    fake.add_project("acme/app", "http://127.0.0.1:9/x.git");
    fake.add_member("acme/app", "maya", 40);
    let iid = fake.open_issue("acme/app", "otto", "Title", "Body");
    fake.add_label("acme/app", iid, "coding agent", "maya");
    let config = config(&format!("gitlab:\n  url: \"{}\"\n", fake.url()));
    let secrets = Secrets::from_lookup(&|v| (v == "GITLAB_TOKEN").then(|| TOKEN.to_owned()));
    let forge = GitLab::connect(&config.gitlab, &secrets).await.unwrap();
    let issue = item(ForgeKind::GitLab, "acme/app", iid);

    // Comments are no edit; a description change is (GitLab's system note).
    fake.comment("acme/app", iid, "otto", "Any news?");
    let edited = labelled_then_edited(&forge, &issue, || {
        fake.edit_text("acme/app", iid, "Title", "Body, edited")
    })
    .await;
    // A title change is one too.
    fake.edit_text("acme/app", iid, "New title", "Body, edited");
    assert!(last_edit(&forge, &issue).await > edited);
}
