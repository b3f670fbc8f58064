//! Git on the host against real repositories served over smart HTTP by
//! `git http-backend`, behind token authentication.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::git_http;

use forgehand::config::Secret;
use forgehand::git::{self, Credentials, GitError, MAX_AUTH_ATTEMPTS};
use git2::{Repository, Signature};
use git_http::GitHttpServer;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

const TOKEN: &str = "ghs_testtokenNeverOnDisk123";

fn creds(token: &str) -> Credentials {
    Credentials {
        username: "x-access-token".into(),
        token: Secret::new(token),
    }
}

fn signature() -> Signature<'static> {
    Signature::now("forgehand", "forgehand@localhost").unwrap()
}

fn bare_repo(root: &Path, name: &str) -> PathBuf {
    git_http::bare_repo(root, name, &[("README.md", "# app\n")])
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

async fn server() -> (tempfile::TempDir, GitHttpServer, String) {
    let root = tempfile::tempdir().unwrap();
    bare_repo(root.path(), "acme/app.git");
    let server = GitHttpServer::start(root.path(), "x-access-token", TOKEN).await;
    let url = server.url("acme/app.git");
    (root, server, url)
}

fn scan_for_token(dir: &Path) {
    for entry in walk(dir) {
        if let Ok(bytes) = std::fs::read(&entry) {
            assert!(
                !bytes.windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes()),
                "the token is written in {}",
                entry.display()
            );
        }
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clone_branch_commit_push_with_the_token_only_in_memory() {
    let (root, _server, url) = server().await;
    let dest = tempfile::tempdir().unwrap();
    let path = dest.path().join("app");
    let (u, p) = (url.clone(), path.clone());
    let pushed = blocking(move || {
        let repo = git::clone(&u, &p, None, Some(&creds(TOKEN))).unwrap();
        git::checkout_new_branch(&repo, "forgehand/issue-7").unwrap();
        std::fs::write(p.join("src.txt"), "new file\n").unwrap();
        std::fs::remove_file(p.join("README.md")).unwrap();
        let commit = git::commit_all(&repo, "Add src.txt (forgehand task issue-7)", &signature())
            .unwrap()
            .unwrap();
        assert_eq!(
            git::commit_all(&repo, "nothing", &signature()).unwrap(),
            None,
            "nothing left to commit"
        );
        git::push(
            &repo,
            &u,
            "forgehand/issue-7",
            "forgehand/issue-7",
            Some(&creds(TOKEN)),
        )
        .unwrap();
        commit
    })
    .await;
    let remote = Repository::open_bare(root.path().join("acme/app.git")).unwrap();
    let head = remote
        .find_reference("refs/heads/forgehand/issue-7")
        .unwrap()
        .target()
        .unwrap();
    assert_eq!(head, pushed);
    let tree = remote.find_commit(head).unwrap().tree().unwrap();
    assert!(
        tree.get_name("src.txt").is_some() && tree.get_name("README.md").is_none(),
        "the deletion was committed too"
    );
    // The working tree (later copied into a sandbox) holds no credential.
    scan_for_token(&path);
    let config = std::fs::read_to_string(path.join(".git/config")).unwrap();
    assert!(config.contains(&url) && !config.contains('@'), "{config}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_wrong_token_is_an_auth_error_with_capped_attempts() {
    let (_root, server, url) = server().await;
    let dest = tempfile::tempdir().unwrap();
    let (u, p) = (url.clone(), dest.path().join("a"));
    let err = blocking(move || git::clone(&u, &p, None, None).err().expect("no token, no clone")).await;
    assert!(matches!(err, GitError::Auth { .. }), "{err}");
    assert!(err.to_string().contains("no token is configured"), "{err}");

    server.refused.store(0, Ordering::SeqCst);
    let (u, p) = (url.clone(), dest.path().join("b"));
    let err = blocking(move || {
        git::clone(&u, &p, None, Some(&creds("wrong-token")))
            .err()
            .expect("wrong token")
    })
    .await;
    assert!(matches!(err, GitError::Auth { .. }), "{err}");
    assert!(
        !err.to_string().contains("wrong-token"),
        "the token never appears in errors: {err}"
    );
    let refused = server.refused.load(Ordering::SeqCst);
    assert!(
        refused <= MAX_AUTH_ATTEMPTS as usize + 1,
        "{refused} refused requests"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_to_a_moved_remote_is_rejected_and_fetch_brings_the_new_commits() {
    let (_root, _server, url) = server().await;
    let dest = tempfile::tempdir().unwrap();
    let (u, d) = (url.clone(), dest.path().to_owned());
    blocking(move || {
        let ours = git::clone(&u, &d.join("ours"), None, Some(&creds(TOKEN))).unwrap();
        let theirs = git::clone(&u, &d.join("theirs"), None, Some(&creds(TOKEN))).unwrap();
        std::fs::write(d.join("theirs/theirs.txt"), "x").unwrap();
        let their_commit = git::commit_all(&theirs, "theirs", &signature()).unwrap().unwrap();
        git::push(&theirs, &u, "main", "main", Some(&creds(TOKEN))).unwrap();

        std::fs::write(d.join("ours/ours.txt"), "y").unwrap();
        git::commit_all(&ours, "ours", &signature()).unwrap().unwrap();
        let err = git::push(&ours, &u, "main", "main", Some(&creds(TOKEN))).unwrap_err();
        assert!(matches!(err, GitError::Rejected { .. }), "{err}");
        assert!(!err.is_retryable());

        git::fetch(
            &ours,
            &u,
            &["+refs/heads/main:refs/remotes/origin/main"],
            Some(&creds(TOKEN)),
        )
        .unwrap();
        let fetched = ours
            .find_reference("refs/remotes/origin/main")
            .unwrap()
            .target()
            .unwrap();
        assert_eq!(fetched, their_commit);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_side_rejection_is_reported_through_the_push_status() {
    let (root, _server, url) = server().await;
    let hook = root.path().join("acme/app.git/hooks/pre-receive");
    std::fs::create_dir_all(hook.parent().unwrap()).unwrap();
    std::fs::write(&hook, "#!/bin/sh\necho 'branch is protected' >&2\nexit 1\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let dest = tempfile::tempdir().unwrap();
    let (u, p) = (url.clone(), dest.path().join("app"));
    let err = blocking(move || {
        let repo = git::clone(&u, &p, None, Some(&creds(TOKEN))).unwrap();
        git::checkout_new_branch(&repo, "forgehand/x").unwrap();
        std::fs::write(p.join("f.txt"), "f").unwrap();
        git::commit_all(&repo, "f", &signature()).unwrap().unwrap();
        git::push(&repo, &u, "forgehand/x", "forgehand/x", Some(&creds(TOKEN))).unwrap_err()
    })
    .await;
    match &err {
        GitError::Rejected { refname, reason } => {
            assert_eq!(refname, "refs/heads/forgehand/x");
            assert!(reason.contains("pre-receive hook declined"), "{reason}");
        }
        other => panic!("expected a rejection, got {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_remote_is_a_retryable_network_error() {
    let dest = tempfile::tempdir().unwrap();
    let p = dest.path().join("x");
    let err = blocking(move || {
        git::clone("http://127.0.0.1:9/acme/app.git", &p, None, Some(&creds(TOKEN)))
            .err()
            .expect("unreachable")
    })
    .await;
    assert!(
        matches!(err, GitError::Network { .. }) && err.is_retryable(),
        "{err}"
    );
}

/// Answers every request with a redirect to the same path on `target`.
async fn redirector(target: String) -> (String, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let target = target.clone();
            tokio::spawn(async move {
                let mut head = vec![0u8; 8192];
                let n = stream.read(&mut head).await.unwrap_or(0);
                let line = String::from_utf8_lossy(&head[..n])
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .to_owned();
                let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
                let reply = format!("HTTP/1.1 302 Found\r\nLocation: {target}{path}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                let _ = stream.write_all(reply.as_bytes()).await;
            });
        }
    });
    (format!("http://{addr}"), task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_goes_only_to_the_address_the_operation_was_given() {
    let (_root, server, _) = server().await;
    // The remote forgehand was given redirects to another address (here the
    // real server under another name): libgit2 follows, and is asked for
    // credentials there. The token must not follow.
    let (front, task) = redirector(format!("http://localhost:{}", server.addr.port())).await;
    let dest = tempfile::tempdir().unwrap();
    let (u, p) = (format!("{front}/acme/app.git"), dest.path().join("a"));
    let err = blocking(move || {
        git::clone(&u, &p, None, Some(&creds(TOKEN)))
            .err()
            .expect("no clone through a redirect")
    })
    .await;
    task.abort();
    assert!(err.to_string().contains("authentication refused"), "{err}");
    assert!(!err.to_string().contains(TOKEN));
    assert!(
        server.refused.load(Ordering::SeqCst) >= 1,
        "the other address was asked without the token"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_that_would_land_after_its_deadline_is_given_up_before_any_ref_moves() {
    let (_root, server, url) = server().await;
    let dest = tempfile::tempdir().unwrap();
    let (u, d) = (url.clone(), dest.path().to_owned());
    let (before, err) = blocking(move || {
        let repo = git::clone(&u, &d.join("a"), None, Some(&creds(TOKEN))).unwrap();
        let before = repo.head().unwrap().target().unwrap();
        std::fs::write(d.join("a/late.txt"), "late\n").unwrap();
        git::commit_all(&repo, "late work", &signature())
            .unwrap()
            .unwrap();
        // The claim ran out a moment ago.
        let deadline = std::time::Instant::now() - std::time::Duration::from_millis(1);
        let err = git::push_before(
            &repo,
            &u,
            ("main", "main"),
            Some(&creds(TOKEN)),
            git::BranchAt::Unchecked,
            Some(deadline),
        )
        .unwrap_err();
        (before, err)
    })
    .await;
    assert!(matches!(err, GitError::Late { .. }), "{err}");
    assert!(err.to_string().contains("claim on the task ran out"), "{err}");
    // The remote still has what it had.
    let (u, d) = (url.clone(), dest.path().to_owned());
    let now = blocking(move || {
        let repo = git::clone(&u, &d.join("b"), None, Some(&creds(TOKEN))).unwrap();
        let head = repo.head().unwrap().target().unwrap();
        head
    })
    .await;
    assert_eq!(now, before);
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_on_stale_knowledge_of_the_branch_never_lands_over_the_new_holders() {
    let (_root, server, url) = server().await;
    let dest = tempfile::tempdir().unwrap();
    let (u, d) = (url.clone(), dest.path().to_owned());
    let (stale, newer, errors) = blocking(move || {
        // The old holder saw the branch at `stale` and built on it.
        let old = git::clone(&u, &d.join("old"), None, Some(&creds(TOKEN))).unwrap();
        let stale = old.head().unwrap().target().unwrap();
        std::fs::write(d.join("old/late.txt"), "late\n").unwrap();
        git::commit_all(&old, "late work", &signature()).unwrap().unwrap();
        // The new holder pushed meanwhile.
        let new = git::clone(&u, &d.join("new"), None, Some(&creds(TOKEN))).unwrap();
        std::fs::write(d.join("new/work.txt"), "new\n").unwrap();
        let newer = git::commit_all(&new, "new work", &signature()).unwrap().unwrap();
        git::push(&new, &u, "main", "main", Some(&creds(TOKEN))).unwrap();
        let push = |expected| {
            git::push_before(&old, &u, ("main", "main"), Some(&creds(TOKEN)), expected, None).unwrap_err()
        };
        // Where the branch was, and as if it had not existed.
        let errors = [push(git::BranchAt::Commit(stale)), push(git::BranchAt::Missing)];
        (stale, newer, errors)
    })
    .await;
    for err in &errors {
        assert!(matches!(err, GitError::Rejected { .. }), "{err}");
        assert!(err.to_string().contains("the remote branch moved"), "{err}");
        assert!(err.to_string().contains(&newer.to_string()), "{err}");
    }
    assert!(errors[0].to_string().contains(&stale.to_string()));
    assert!(
        errors[1].to_string().contains("last saw it missing"),
        "{}",
        errors[1]
    );
    let (u, d) = (url.clone(), dest.path().to_owned());
    let now = blocking(move || {
        let repo = git::clone(&u, &d.join("check"), None, Some(&creds(TOKEN))).unwrap();
        let head = repo.head().unwrap().target().unwrap();
        head
    })
    .await;
    assert_eq!(now, newer, "the new holder's branch is intact");
    drop(server);
}
