//! The fake forges refuse what GitHub and GitLab refuse, in their words:
//! each test sends what the real service refuses and gets the refusal
//! (pull requests GitHub will not open, listings filtered and ordered as
//! documented, pushes to a protected branch or of workflow files).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::fake_github::FakeGitHub;
use forgehand_test_support::fake_gitlab::FakeGitLab;
use forgehand_test_support::git_http::{self, GitHttpServer, Pusher};

use forgehand::config::{Config, Secret, Secrets};
use forgehand::forge::github::GitHub;
use forgehand::forge::prelude::*;
use forgehand::git::{self, Credentials, GitError};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

const TOKEN: &str = "ghp_fakeRulesToken00000000000000000001";
const REPO: &str = "acme/app";

/// A fake GitHub whose repository `acme/app` has its bare repository
/// (branch `main`, and `feature` one commit ahead of it).
async fn github() -> (tempfile::TempDir, PathBuf, FakeGitHub) {
    let root = tempfile::tempdir().unwrap();
    let bare = git_http::bare_repo(root.path(), "acme/app.git", &[("README.md", "# app\n")]);
    git_http::push_commit(&bare, "feature", "f.txt", "f\n", "a feature");
    let github = FakeGitHub::start(TOKEN).await;
    github.add_repo(REPO, "http://127.0.0.1:9/acme/app.git", Some(bare.clone()));
    (root, bare, github)
}

async fn post(github: &FakeGitHub, path: &str, body: Value) -> (u16, Value) {
    let answer = reqwest::Client::new()
        .post(format!("{}{path}", github.api_url()))
        .bearer_auth(TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap();
    (answer.status().as_u16(), answer.json().await.unwrap())
}

async fn get(url: &str, auth: (&str, &str)) -> (u16, Value) {
    let answer = reqwest::Client::new()
        .get(url)
        .header(auth.0, auth.1)
        .send()
        .await
        .unwrap();
    (answer.status().as_u16(), answer.json().await.unwrap())
}

async fn get_github(github: &FakeGitHub, path: &str) -> (u16, Value) {
    get(
        &format!("{}{path}", github.api_url()),
        ("authorization", &format!("Bearer {TOKEN}")),
    )
    .await
}

/// GitHub's `422 Validation Failed` with exactly `errors`.
fn assert_validation_failed((status, body): (u16, Value), errors: Value) {
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["message"], "Validation Failed", "{body}");
    assert_eq!(body["errors"], errors, "{body}");
    assert_eq!(
        body["documentation_url"], "https://docs.github.com/rest/pulls/pulls#create-a-pull-request",
        "{body}"
    );
}

fn pr(head: &str, base: &str) -> Value {
    json!({"title": "A change", "head": head, "base": base, "body": "b"})
}

#[tokio::test]
async fn a_pull_request_without_a_title_is_refused_as_a_missing_field() {
    let (_root, _bare, github) = github().await;
    let answer = post(
        &github,
        "/repos/acme/app/pulls",
        json!({"head": "feature", "base": "main"}),
    )
    .await;
    assert_validation_failed(
        answer,
        json!([{"resource": "Issue", "code": "missing_field", "field": "title"}]),
    );
    let blank = post(
        &github,
        "/repos/acme/app/pulls",
        json!({"title": " ", "head": "feature", "base": "main"}),
    )
    .await;
    assert_eq!(blank.0, 422);
    // From an issue, the issue gives the title.
    let issue = github.open_issue(REPO, "maya", "Fix the thing", "it");
    let (status, body) = post(
        &github,
        "/repos/acme/app/pulls",
        json!({"issue": issue, "head": "feature", "base": "main"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["title"], "Fix the thing");
}

#[tokio::test]
async fn a_pull_request_onto_a_base_branch_the_repository_lacks_is_refused() {
    let (_root, _bare, github) = github().await;
    let answer = post(&github, "/repos/acme/app/pulls", pr("feature", "develop")).await;
    assert_validation_failed(
        answer,
        json!([{"resource": "PullRequest", "field": "base", "code": "invalid"}]),
    );
    assert!(github.pulls(REPO).is_empty());
}

#[tokio::test]
async fn a_pull_request_from_a_head_branch_the_repository_lacks_is_refused() {
    let (_root, _bare, github) = github().await;
    for head in ["nowhere", "someone-else:feature"] {
        let answer = post(&github, "/repos/acme/app/pulls", pr(head, "main")).await;
        assert_validation_failed(
            answer,
            json!([{"resource": "PullRequest", "field": "head", "code": "invalid"}]),
        );
    }
    // The owner's own `OWNER:BRANCH` is the branch.
    let (status, body) = post(&github, "/repos/acme/app/pulls", pr("acme:feature", "main")).await;
    assert_eq!(status, 201, "{body}");
}

#[tokio::test]
async fn a_pull_request_whose_head_has_no_commits_beyond_the_base_is_refused() {
    let (_root, bare, github) = github().await;
    // `level` is where `main` is: nothing to pull.
    let main = git_http::head_of(&bare, "main");
    let status = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(&bare)
        .args(["branch", "level", &main])
        .status()
        .unwrap();
    assert!(status.success());
    let answer = post(&github, "/repos/acme/app/pulls", pr("level", "main")).await;
    assert_validation_failed(
        answer,
        json!([{"resource": "PullRequest", "code": "custom", "message": "No commits between main and level"}]),
    );
}

#[tokio::test]
async fn a_second_open_pull_request_for_the_same_head_is_refused() {
    let (_root, _bare, github) = github().await;
    let (status, _) = post(&github, "/repos/acme/app/pulls", pr("feature", "main")).await;
    assert_eq!(status, 201);
    let answer = post(&github, "/repos/acme/app/pulls", pr("feature", "main")).await;
    assert_validation_failed(
        answer,
        json!([{"resource": "PullRequest", "code": "custom", "message": "A pull request already exists for acme:feature."}]),
    );
    assert_eq!(github.pulls(REPO).len(), 1);
}

#[tokio::test]
async fn forgehands_github_client_names_what_github_refused() {
    let (_root, _bare, github) = github().await;
    let yaml = format!(
        "github:\n  api_url: \"{}\"\n  repositories: [\"{REPO}\"]\n",
        github.api_url()
    );
    let config = Config::from_yaml(&yaml, Path::new("t.yaml"), Path::new("."), &|_| None).unwrap();
    let secrets = Secrets::from_lookup(&|v| (v == "GITHUB_TOKEN").then(|| TOKEN.to_owned()));
    let forge = GitHub::new(&config.github, &secrets, Duration::from_secs(10)).unwrap();
    let unknown_base = forge
        .create_draft_change(REPO, "feature", "develop", "A change", "b")
        .await
        .unwrap_err()
        .to_string();
    assert!(unknown_base.contains("`base` is invalid"), "{unknown_base}");
    forge
        .create_draft_change(REPO, "feature", "main", "A change", "b")
        .await
        .unwrap();
    let again = forge
        .create_draft_change(REPO, "feature", "main", "A change", "b")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        again.contains("A pull request already exists for acme:feature."),
        "{again}"
    );
}

async fn send(github: &FakeGitHub, method: &str, path: &str, body: Value) -> (u16, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let answer = reqwest::Client::new()
        .request(method, format!("{}{path}", github.api_url()))
        .bearer_auth(TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap();
    (answer.status().as_u16(), answer.json().await.unwrap())
}

/// A body the operation's schema in GitHub's OpenAPI description refuses
/// gets GitHub's 422 `Invalid request.` with a line per problem, and
/// nothing is done: a wrong type, a required field missing, a null where
/// none is allowed, a value outside an enum. Each is also a violation that
/// would fail the test, since forgehand must never send one.
#[tokio::test]
async fn bodies_the_api_description_refuses_get_githubs_invalid_request() {
    let (_root, _bare, github) = github().await;
    let issue = github.open_issue(REPO, "maya", "Fix", "it");
    let comments = format!("/repos/acme/app/issues/{issue}/comments");
    let cases = [
        (
            "POST",
            comments.as_str(),
            json!({"body": 42}),
            "For 'properties/body', 42 is not a string.",
        ),
        ("POST", comments.as_str(), json!({}), "\"body\" wasn't supplied."),
        (
            "POST",
            comments.as_str(),
            json!({"body": null}),
            "For 'properties/body', nil is not a string.",
        ),
        (
            "POST",
            "/repos/acme/app/issues/comments/1/reactions",
            json!({"content": "smile"}),
            "For 'properties/content', smile is not a member of \
             [\"+1\", \"-1\", \"laugh\", \"confused\", \"heart\", \"hooray\", \"rocket\", \"eyes\"].",
        ),
        (
            "POST",
            "/repos/acme/app/pulls",
            json!({"title": "A change", "head": "feature"}),
            "\"base\" wasn't supplied.",
        ),
        (
            "POST",
            &format!("/repos/acme/app/issues/{issue}/labels"),
            json!({"labels": [null]}),
            "For 'items', nil is not a string or object.",
        ),
    ];
    for (method, path, body, line) in &cases {
        let (status, answer) = send(&github, method, path, body.clone()).await;
        assert_eq!(status, 422, "{method} {path} {body}: {answer}");
        assert_eq!(answer["message"], format!("Invalid request.\n\n{line}"), "{body}");
        assert_eq!(answer["status"], "422", "{answer}");
        assert!(
            answer["documentation_url"]
                .as_str()
                .unwrap()
                .starts_with("https://docs.github.com/rest/"),
            "{answer}"
        );
    }
    let (_, answer) = send(&github, "POST", &comments, json!({"body": 42})).await;
    assert_eq!(
        answer["documentation_url"],
        "https://docs.github.com/rest/issues/comments#create-an-issue-comment"
    );
    // Nothing was done.
    let after = github.issue(REPO, issue);
    assert!(after.comments.is_empty() && after.labels.is_empty(), "{after:?}");
    assert!(github.pulls(REPO).is_empty());
    assert!(github.reactions().is_empty());
    // Each refusal is a conformance failure.
    let violations = github.take_violations();
    assert_eq!(violations.len(), cases.len() + 1, "{violations:#?}");
    assert!(
        violations[0].contains("GitHub refuses the body"),
        "{violations:#?}"
    );
    // What GitHub takes still goes through.
    let (status, answer) = send(&github, "POST", &comments, json!({"body": "hi"})).await;
    assert_eq!(status, 201, "{answer}");
}

/// The created_at of the listing's items, as times.
fn times(list: &Value, field: &str) -> Vec<chrono::DateTime<chrono::Utc>> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|c| c[field].as_str().unwrap().parse().unwrap())
        .collect()
}

fn bodies(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|c| c["body"].as_str().unwrap().to_owned())
        .collect()
}

/// Three comments on one issue, each in a second of its own (GitHub's
/// times are whole seconds).
async fn three_comments(github: &FakeGitHub) -> u64 {
    let issue = github.open_issue(REPO, "maya", "Fix", "it");
    for text in ["one", "two", "three"] {
        github.comment(REPO, issue, "maya", text);
        tokio::time::sleep(Duration::from_millis(1010)).await;
    }
    issue
}

#[tokio::test]
async fn comment_listings_read_since_as_a_time_in_any_iso_8601_form() {
    let (_root, _bare, github) = github().await;
    let issue = three_comments(&github).await;
    let path = format!("/repos/acme/app/issues/{issue}/comments");
    let (_, all) = get_github(&github, &path).await;
    assert_eq!(bodies(&all), ["one", "two", "three"]);
    let second = times(&all, "created_at")[1];
    // GitHub writes whole seconds: `2026-01-01T00:00:00Z`.
    let written = all[1]["created_at"].as_str().unwrap();
    assert!(written.len() == 20 && !written.contains('.'), "{written}");
    // The second comment's time, written three ways that compare
    // differently as strings: with an offset and fractional seconds,
    // without a zone, and as GitHub writes it.
    let with_offset = (second + chrono::Duration::hours(2))
        .format("%Y-%m-%dT%H:%M:%S%.3f+02:00")
        .to_string();
    let whole_second = second.format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let no_zone = second.format("%Y-%m-%dT%H:%M:%S%.3f").to_string();
    for since in [with_offset, no_zone] {
        for listing in [path.clone(), "/repos/acme/app/issues/comments".into()] {
            let encoded = format!("{listing}?since={}", urlencode(&since));
            let (status, list) = get_github(&github, &encoded).await;
            assert_eq!(status, 200, "{list}");
            assert_eq!(bodies(&list), ["two", "three"], "since={since} on {listing}");
        }
    }
    // A whole second at or before the comment: it and whatever came in that second.
    let (_, list) = get_github(&github, &format!("{path}?since={}", urlencode(&whole_second))).await;
    assert!(bodies(&list).contains(&"two".to_owned()), "{list}");
    // What GitHub cannot read, it refuses.
    let (status, refusal) = get_github(&github, &format!("{path}?since=yesterday")).await;
    assert_eq!(status, 422, "{refusal}");
    assert_eq!(
        refusal["message"],
        "The since parameter needs to be in ISO 8601 format: YYYY-MM-DDTHH:MM:SSZ"
    );
}

fn urlencode(text: &str) -> String {
    text.replace('+', "%2B").replace(':', "%3A")
}

#[tokio::test]
async fn comment_listings_are_oldest_first_unless_sorted_by_update() {
    let (_root, _bare, github) = github().await;
    let issue = three_comments(&github).await;
    let first = github.issue(REPO, issue).comments[0].0;
    github.edit_comment(REPO, first, "one, edited");
    let (_, by_default) = get_github(&github, "/repos/acme/app/issues/comments").await;
    assert_eq!(bodies(&by_default), ["one, edited", "two", "three"]);
    let (_, by_update) = get_github(
        &github,
        "/repos/acme/app/issues/comments?sort=updated&direction=asc",
    )
    .await;
    assert_eq!(bodies(&by_update), ["two", "three", "one, edited"]);
    let (_, newest_first) = get_github(
        &github,
        "/repos/acme/app/issues/comments?sort=created&direction=desc",
    )
    .await;
    assert_eq!(bodies(&newest_first), ["three", "two", "one, edited"]);
    // `direction` is ignored without `sort`.
    let (_, ignored) = get_github(&github, "/repos/acme/app/issues/comments?direction=desc").await;
    assert_eq!(bodies(&ignored), ["one, edited", "two", "three"]);
    // An issue's own comments: oldest first, whatever was edited.
    let (_, own) = get_github(&github, &format!("/repos/acme/app/issues/{issue}/comments")).await;
    assert_eq!(bodies(&own), ["one, edited", "two", "three"]);
}

#[tokio::test]
async fn gitlab_notes_are_newest_first_unless_asked_and_updated_after_is_a_time() {
    const GL_TOKEN: &str = "glpat-fakeRulesToken000001";
    let gitlab = FakeGitLab::start(GL_TOKEN).await;
    gitlab.add_project("acme/app", "http://127.0.0.1:9/acme/app.git");
    let iid = gitlab.open_issue("acme/app", "maya", "Fix", "it");
    for text in ["one", "two", "three"] {
        gitlab.comment("acme/app", iid, "maya", text);
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    let base = format!("{}/api/v4/projects/acme%2Fapp", gitlab.url());
    let auth = ("private-token", GL_TOKEN);
    let notes = format!("{base}/issues/{iid}/notes");
    let (_, newest_first) = get(&notes, auth).await;
    assert_eq!(bodies(&newest_first), ["three", "two", "one"]);
    let (_, oldest_first) = get(&format!("{notes}?sort=asc&order_by=created_at"), auth).await;
    assert_eq!(bodies(&oldest_first), ["one", "two", "three"]);
    let (status, refusal) = get(&format!("{notes}?sort=up"), auth).await;
    assert_eq!(
        (status, refusal),
        (400, json!({"error": "sort does not have a valid value"}))
    );

    // `updated_after` with an offset: the same time, read as a time.
    let (_, issue) = get(&format!("{base}/issues/{iid}"), auth).await;
    let updated: chrono::DateTime<chrono::Utc> = issue["updated_at"].as_str().unwrap().parse().unwrap();
    let with_offset = (updated - chrono::Duration::hours(5))
        .format("%Y-%m-%dT%H:%M:%S%.3f-05:00")
        .to_string();
    let (status, list) = get(
        &format!("{base}/issues?updated_after={}", urlencode(&with_offset)),
        auth,
    )
    .await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    let (status, refusal) = get(&format!("{base}/issues?updated_after=soon"), auth).await;
    assert_eq!(
        (status, refusal),
        (400, json!({"error": "updated_after is invalid"}))
    );
}

/// A clone of the served repository with `file` committed on `branch`.
async fn clone_with(url: &str, branch: &str, file: &str) -> (tempfile::TempDir, PathBuf) {
    let dest = tempfile::tempdir().unwrap();
    let (url, path, branch, file) = (
        url.to_owned(),
        dest.path().join("app"),
        branch.to_owned(),
        file.to_owned(),
    );
    let work = path.clone();
    tokio::task::spawn_blocking(move || {
        let repo = git::clone(&url, &path, None, Some(&creds())).unwrap();
        if branch != "main" {
            git::checkout_new_branch(&repo, &branch).unwrap();
        }
        let full = path.join(&file);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(&full, "on: push\n").unwrap();
        let who = git2::Signature::now("forgehand", "forgehand@localhost").unwrap();
        git::commit_all(&repo, "a change", &who).unwrap().unwrap();
    })
    .await
    .unwrap();
    (dest, work)
}

fn creds() -> Credentials {
    Credentials {
        username: "x-access-token".into(),
        token: Secret::new(TOKEN),
    }
}

/// `git push` (the command) of `refspecs` from `work`: what it printed.
fn git_push(work: &Path, url: &str, refspecs: &[&str]) -> String {
    let authed = url.replacen("http://", &format!("http://x-access-token:{TOKEN}@"), 1);
    let out = std::process::Command::new("git")
        .current_dir(work)
        .args(["push", "--porcelain", &authed])
        .args(refspecs)
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

async fn served() -> (tempfile::TempDir, PathBuf, GitHttpServer, String) {
    let root = tempfile::tempdir().unwrap();
    let bare = git_http::bare_repo(root.path(), "acme/app.git", &[("README.md", "# app\n")]);
    let server = GitHttpServer::start(root.path(), "x-access-token", TOKEN).await;
    let url = server.url("acme/app.git");
    (root, bare, server, url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_to_a_protected_branch_is_refused_in_githubs_words() {
    let (_root, bare, _server, url) = served().await;
    git_http::protect_branch(&bare, "main");
    let before = git_http::head_of(&bare, "main");
    let (_dir, work) = clone_with(&url, "main", "a.txt").await;
    std::process::Command::new("git")
        .current_dir(&work)
        .args(["branch", "side"])
        .status()
        .unwrap();
    // As `git push` shows it: GH006 from the remote, the ref's own status;
    // the other ref of the same push goes through.
    let said = git_push(&work, &url, &["main:main", "side:side"]);
    assert!(
        said.contains("remote: error: GH006: Protected branch update failed for refs/heads/main."),
        "{said}"
    );
    assert!(
        said.contains("remote: error: Changes must be made through a pull request."),
        "{said}"
    );
    assert!(
        said.contains(
            "!\trefs/heads/main:refs/heads/main\t[remote rejected] (protected branch hook declined)"
        ),
        "{said}"
    );
    assert_eq!(git_http::head_of(&bare, "main"), before);
    assert_eq!(git_http::log(&bare, "side"), ["a change", "initial"], "{said}");
    assert_eq!(
        git_http::refused_pushes(&bare),
        ["refs/heads/main protected branch"]
    );

    // forgehand's push (libgit2) reads the same status.
    let err = tokio::task::spawn_blocking(move || {
        let repo = git2::Repository::open(&work).unwrap();
        git::push(&repo, &url, "main", "main", Some(&creds())).unwrap_err()
    })
    .await
    .unwrap();
    match err {
        GitError::Rejected { refname, reason } => {
            assert_eq!(refname, "refs/heads/main");
            assert_eq!(reason, "protected branch hook declined");
        }
        other => panic!("expected a rejection, got {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_of_workflow_files_without_the_permission_is_refused_in_githubs_words() {
    let (_root, bare, _server, url) = served().await;
    git_http::refuse_workflow_files_from(&bare, Pusher::App);
    let (_dir, work) = clone_with(&url, "forgehand/issue-1", ".github/workflows/ci.yml").await;
    let refusal = "refusing to allow a GitHub App to create or update workflow `.github/workflows/ci.yml` without `workflows` permission";
    let said = git_push(&work, &url, &["forgehand/issue-1:forgehand/issue-1"]);
    assert!(
        said.contains(&format!(
            "!\trefs/heads/forgehand/issue-1:refs/heads/forgehand/issue-1\t[remote rejected] ({refusal})"
        )),
        "{said}"
    );
    // GitHub says it only in the ref's status.
    assert!(!said.contains("remote: refusing"), "{said}");
    assert!(git_http::files_of(&bare, "forgehand/issue-1").is_empty());

    let remote = url.clone();
    let err = tokio::task::spawn_blocking(move || {
        let repo = git2::Repository::open(&work).unwrap();
        git::push(
            &repo,
            &remote,
            "forgehand/issue-1",
            "forgehand/issue-1",
            Some(&creds()),
        )
        .unwrap_err()
    })
    .await
    .unwrap();
    match err {
        GitError::Rejected { reason, .. } => assert_eq!(reason, refusal),
        other => panic!("expected a rejection, got {other}"),
    }
    // A token's refusal names the scope instead.
    git_http::refuse_workflow_files_from(&bare, Pusher::OAuthApp);
    let (_dir, work) = clone_with(&url, "forgehand/issue-2", ".github/workflows/ci.yml").await;
    let said = git_push(&work, &url, &["forgehand/issue-2:forgehand/issue-2"]);
    assert!(
        said.contains("(refusing to allow an OAuth App to create or update workflow `.github/workflows/ci.yml` without `workflow` scope)"),
        "{said}"
    );
    assert_eq!(git_http::refused_pushes(&bare).len(), 3);
}

#[tokio::test]
async fn gitlab_refuses_merge_requests_between_missing_or_equal_branches_and_a_second_one() {
    const GL_TOKEN: &str = "glpat-fakeRulesToken000002";
    let (_root, gitlab) = acme_app_with_a_feature_branch(GL_TOKEN).await;
    let open = |source: &str, target: &str| {
        let body = json!({"source_branch": source, "target_branch": target, "title": "A change"});
        post_merge_request(&gitlab, GL_TOKEN, body)
    };
    assert_eq!(
        open("main", "main").await,
        (
            422,
            json!({"message": ["You can't use same project/branch for source and target"]})
        )
    );
    assert_eq!(
        open("nowhere", "main").await,
        (400, json!({"message": {"source_branch": ["does not exist"]}}))
    );
    assert_eq!(
        open("feature", "develop").await,
        (400, json!({"message": {"target_branch": ["does not exist"]}}))
    );
    let (status, made) = open("feature", "main").await;
    assert_eq!(status, 201, "{made}");
    assert_eq!(
        open("feature", "main").await,
        (
            409,
            json!({"message": [format!("Another open merge request already exists for this source branch: !{}", made["iid"])]})
        )
    );
}

#[tokio::test]
async fn gitlab_refuses_a_missing_required_attribute_or_a_value_of_another_type_in_its_words() {
    const GL_TOKEN: &str = "glpat-fakeRulesToken000003";
    let (_root, gitlab) = acme_app_with_a_feature_branch(GL_TOKEN).await;
    let send = |body: Value| post_merge_request(&gitlab, GL_TOKEN, body);
    assert_eq!(
        send(json!({"source_branch": "feature", "target_branch": "main"})).await,
        (400, json!({"error": "title is missing"}))
    );
    assert_eq!(
        send(json!({"source_branch": "feature", "target_branch": "main", "title": "t", "remove_source_branch": "soon"})).await,
        (400, json!({"error": "remove_source_branch is invalid"}))
    );
    assert!(gitlab.merge_requests("acme/app").is_empty(), "nothing was opened");
    let violations = gitlab.take_violations();
    assert_eq!(violations.len(), 2, "{violations:#?}");
    assert!(
        violations[0].contains("title is missing") && violations[0].contains("merge_requests.md"),
        "{violations:#?}"
    );
    let (status, made) = send(json!({"source_branch": "feature", "target_branch": "main", "title": "t", "remove_source_branch": true})).await;
    assert_eq!(status, 201, "{made}");
}

/// The fake GitLab with acme/app, whose repository has `main` and a
/// `feature` branch one commit ahead (the folder holding it beside).
async fn acme_app_with_a_feature_branch(token: &str) -> (tempfile::TempDir, FakeGitLab) {
    let root = tempfile::tempdir().unwrap();
    let bare = git_http::bare_repo(root.path(), "acme/app.git", &[("README.md", "# app\n")]);
    git_http::push_commit(&bare, "feature", "f.txt", "f\n", "a feature");
    let gitlab = FakeGitLab::start(token).await;
    gitlab.add_project("acme/app", "http://127.0.0.1:9/acme/app.git");
    gitlab.set_repository("acme/app", bare);
    (root, gitlab)
}

/// `POST` a merge request of acme/app to the fake GitLab: its status and body.
async fn post_merge_request(gitlab: &FakeGitLab, token: &str, body: Value) -> (u16, Value) {
    let url = format!("{}/api/v4/projects/acme%2Fapp/merge_requests", gitlab.url());
    let answer = reqwest::Client::new()
        .post(url)
        .header("private-token", token)
        .json(&body)
        .send()
        .await
        .unwrap();
    (answer.status().as_u16(), answer.json::<Value>().await.unwrap())
}
