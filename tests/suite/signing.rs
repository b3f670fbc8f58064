//! Commits that say who asked, and signed ones: a labelled issue delivered
//! end to end (the real daemon, the fake GitHub, a real git remote, real
//! Docker, the scripted model). Each task commit on the pushed branch ends
//! with `Co-authored-by:` naming the labeller at GitHub's noreply address,
//! and the PR names them; with `delivery.signing.ssh_key_env` set, each
//! commit verifies with `git verify-commit` against an allowed-signers
//! file holding the key's public half (the key made by `ssh-keygen`);
//! without it, the commits are unsigned but still name the labeller. A
//! run a writer's mention asked for (no label) names the mention's author,
//! their id looked up by login. Whatever author, committer, dates and
//! trailers the model gave its commits, the pushed ones are by forgehand's
//! own identity (`delivery.author_name` / `author_email`), dated at the
//! push, and name only the labeller.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::daemon_rig::DaemonProcess;
use forgehand_test_support::fake_github::BOT;
use forgehand_test_support::github_world::{World, DONE, REPO};
use forgehand_test_support::scripted_model::{call, edit_and_commit, text, Reply};
use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const FILES: [(&str, &str); 2] = [("greet.py", "print('Hello')\n"), ("README.md", "# app\n")];
const KEY_VAR: &str = "FORGEHAND_TEST_SIGNING_KEY";
/// Maya labels the issue; the fake GitHub gives her the id 31676 and
/// serves its pages from github.example.
const TRAILER: &str = "Co-authored-by: maya <31676+maya@users.noreply.github.example>";
const BRANCH: &str = "forgehand/issue-1";

fn git(bare: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .arg("--git-dir")
        .arg(bare)
        .args(args)
        .output()
        .unwrap()
}

/// The task's commits on the pushed branch (main..branch), newest first.
fn task_commits(bare: &Path) -> Vec<String> {
    let out = git(bare, &["rev-list", &format!("main..{BRANCH}")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

fn message(bare: &Path, sha: &str) -> String {
    String::from_utf8_lossy(&git(bare, &["log", "-1", "--format=%B", sha]).stdout).into_owned()
}

fn verify(bare: &Path, sha: &str, allowed: &Path) -> std::process::Output {
    git(
        bare,
        &[
            "-c",
            &format!("gpg.ssh.allowedSignersFile={}", allowed.display()),
            "verify-commit",
            sha,
        ],
    )
}

/// An Ed25519 key pair made by `ssh-keygen` in `dir`: (private, public).
fn key_pair(dir: &Path) -> (String, String) {
    let path = dir.join("signing_key");
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "forgehand-signing", "-f"])
        .arg(&path)
        .status()
        .expect("ssh-keygen (openssh-client) is installed");
    assert!(made.success());
    (
        std::fs::read_to_string(&path).unwrap(),
        std::fs::read_to_string(path.with_extension("pub")).unwrap(),
    )
}

/// Labels the usual issue as maya, runs the daemon with `extra_env`, and
/// waits until the issue is done.
async fn deliver(world: &World, extra_env: &[(&'static str, String)]) -> DaemonProcess {
    let mut env = world.env();
    env.extend(extra_env.iter().cloned());
    let daemon = DaemonProcess::start(&world.config, &["run"], &env, &world.log_path());
    let issue = world.labelled_issue("Greet the world");
    world.wait_for_end(issue).await;
    assert_eq!(
        world.github.issue(REPO, issue).labels,
        vec![DONE.to_owned()],
        "{}",
        daemon.log_text()
    );
    daemon
}

fn assert_names_maya(world: &World) -> Vec<String> {
    assert_names(world, TRAILER, "maya")
}

/// Each task commit ends with `trailer` once, and the PR names `@login`.
fn assert_names(world: &World, trailer: &str, login: &str) -> Vec<String> {
    let commits = task_commits(&world.bare);
    assert!(!commits.is_empty());
    for sha in &commits {
        let text = message(&world.bare, sha);
        assert_eq!(text.matches(trailer).count(), 1, "{text}");
        assert!(text.starts_with("Greet the whole world\n\n"), "{text}");
    }
    let pulls = world.github.pulls(REPO);
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    assert!(
        pulls[0].body.contains(&format!("Asked for by @{login},")),
        "{}",
        pulls[0].body
    );
    commits
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_signing_key_each_commit_names_the_labeller_and_verifies_with_git() {
    let yaml = format!("delivery:\n  signing:\n    ssh_key_env: \"{KEY_VAR}\"\n");
    let world = World::with_repository(edit_and_commit(Duration::ZERO), &FILES, &yaml).await;
    let (private, public) = key_pair(world.dir.path());
    let mut daemon = deliver(&world, &[(KEY_VAR, private.clone())]).await;
    let commits = assert_names_maya(&world);
    let allowed = world.dir.path().join("allowed_signers");
    std::fs::write(&allowed, format!("forgehand@localhost {public}")).unwrap();
    for sha in &commits {
        let out = verify(&world.bare, sha, &allowed);
        assert!(
            out.status.success(),
            "{sha}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&git(&world.bare, &["cat-file", "commit", sha]).stdout)
        );
    }
    // Another key does not verify them: the signature is the configured key's.
    let (_, other) = key_pair(&world.dir.path().join("git"));
    std::fs::write(&allowed, format!("forgehand@localhost {other}")).unwrap();
    assert!(!verify(&world.bare, &commits[0], &allowed).status.success());
    assert!(daemon.terminate().success());
    let log = daemon.log_text();
    let secret_line = private.lines().nth(1).unwrap();
    assert!(!log.contains(secret_line), "the private key is in the log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_key_the_commits_name_the_labeller_unsigned() {
    let world = World::with_repository(edit_and_commit(Duration::ZERO), &FILES, "").await;
    let mut daemon = deliver(&world, &[]).await;
    let commits = assert_names_maya(&world);
    for sha in &commits {
        let raw =
            String::from_utf8_lossy(&git(&world.bare, &["cat-file", "commit", sha]).stdout).into_owned();
        assert!(!raw.contains("gpgsig"), "{raw}");
        // Author and committer are forgehand's, as the sandbox wrote them.
        assert!(raw.contains("\nauthor forgehand <forgehand@localhost>"), "{raw}");
    }
    assert!(daemon.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signing_key_that_is_not_one_stops_the_start_naming_the_setting() {
    let yaml = format!("delivery:\n  signing:\n    ssh_key_env: \"{KEY_VAR}\"\n");
    let world = World::with_repository(edit_and_commit(Duration::ZERO), &FILES, &yaml).await;
    let mut env = world.env();
    env.push((
        KEY_VAR,
        "-----BEGIN OPENSSH PRIVATE KEY-----\nnot a key\n".to_owned(),
    ));
    let mut daemon = DaemonProcess::start(&world.config, &["run"], &env, &world.log_path());
    let status = daemon.wait(Duration::from_secs(30));
    assert!(!status.success());
    let log = daemon.log_text();
    assert!(
        log.contains("delivery.signing.ssh_key_env") && log.contains(KEY_VAR),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_a_writers_mention_asked_for_names_the_mentions_author() {
    let world = World::with_repository(edit_and_commit(Duration::ZERO), &FILES, "").await;
    // Jonas may write; the fake GitHub gives him the id 39595 (`GET /users/jonas`).
    world.github.set_permission(REPO, "jonas", "write");
    let mut daemon = world.start();
    let issue = world.github.open_issue(
        REPO,
        "maya",
        "Greet the world",
        "The greeting should say hello to the world.",
    );
    world
        .github
        .comment(REPO, issue, "jonas", &format!("@{BOT} please take this one."));
    world.wait_for_done(issue, Duration::from_secs(180)).await;
    assert_names(
        &world,
        "Co-authored-by: jonas <39595+jonas@users.noreply.github.example>",
        "jonas",
    );
    assert!(daemon.terminate().success());
}

/// The model edits and commits as a maintainer: author, committer and
/// dates of its choosing, and trailers that name the maintainer.
fn commit_as_a_maintainer() -> Vec<(Reply, Option<Duration>)> {
    let mona = "Mona Maintainer <mona@example.org>";
    let command = format!(
        "git add -A && GIT_COMMITTER_NAME='Mona Maintainer' GIT_COMMITTER_EMAIL=mona@example.org \
         GIT_COMMITTER_DATE=2001-02-03T04:05:06Z git commit -q --author='{mona}' --date=2001-02-03T04:05:06Z \
         -m 'Greet the whole world' -m 'Co-authored-by: {mona}' -m 'Signed-off-by: {mona}' \
         -m 'On-behalf-of: @example-org <org@example.org>' && git log -1 --format='%an %cn %B'"
    );
    vec![
        (
            call(
                "text_editor_str_replace",
                json!({"path": "/workspace/project/greet.py", "old_str": "Hello", "new_str": "Hello, world"}),
            ),
            None,
        ),
        (
            call("command_executor_execute_command", json!({ "command": command })),
            None,
        ),
        (
            text("Changed the greeting in greet.py to greet the whole world."),
            None,
        ),
    ]
}

/// The seconds in a commit's `author` or `committer` header line.
fn seconds(raw: &str, header: &str) -> i64 {
    let line = raw
        .lines()
        .find(|l| l.starts_with(&format!("{header} ")))
        .unwrap_or_else(|| panic!("no {header} in {raw}"));
    line.rsplit(' ').nth(1).unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_commits_as_a_maintainer_gets_forgehands_signed_commits() {
    let yaml = format!(
        "delivery:\n  author_name: \"forgehand-bot\"\n  author_email: \"bot@forgehand.example\"\n  signing:\n    ssh_key_env: \"{KEY_VAR}\"\n"
    );
    let world = World::with_repository(commit_as_a_maintainer(), &FILES, &yaml).await;
    let (private, public) = key_pair(world.dir.path());
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let mut daemon = deliver(&world, &[(KEY_VAR, private)]).await;
    // The model did commit as the maintainer in the sandbox.
    let seen: Vec<String> = world
        .model
        .requests()
        .await
        .iter()
        .map(|r| r.to_string())
        .collect();
    assert!(
        seen.iter().any(|r| r.contains("Mona Maintainer Mona Maintainer")),
        "{seen:?}"
    );
    let commits = assert_names_maya(&world);
    let allowed = world.dir.path().join("allowed_signers");
    std::fs::write(&allowed, format!("bot@forgehand.example {public}")).unwrap();
    for sha in &commits {
        let raw =
            String::from_utf8_lossy(&git(&world.bare, &["cat-file", "commit", sha]).stdout).into_owned();
        assert!(
            raw.contains("\nauthor forgehand-bot <bot@forgehand.example> "),
            "{raw}"
        );
        assert!(
            raw.contains("\ncommitter forgehand-bot <bot@forgehand.example> "),
            "{raw}"
        );
        assert!(
            seconds(&raw, "author") >= started && seconds(&raw, "committer") >= started,
            "{raw}"
        );
        for claim in ["mona", "Signed-off-by", "On-behalf-of", "org@example.org"] {
            assert!(
                !raw.to_lowercase().contains(&claim.to_lowercase()),
                "{claim} in {raw}"
            );
        }
        let out = verify(&world.bare, sha, &allowed);
        assert!(
            out.status.success(),
            "{sha}: {}\n{raw}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(daemon.terminate().success());
}
