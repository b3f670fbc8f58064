//! The mirror of each repository against real repositories served over
//! smart HTTP by `git http-backend`: incremental and shallow fetches,
//! branches that move, are force-pushed or deleted, a damaged mirror made
//! again, and two repositories that never share one. The sandbox's history
//! pack is read back by the real git CLI.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand::config::Secret;
use forgehand::git::history_pack;
use forgehand::git::mirror::Mirrors;
use forgehand::git::Credentials;
use forgehand_test_support::eval_fixture::git;
use forgehand_test_support::git_http::{self, GitHttpServer};
use git2::Repository;
use std::path::{Path, PathBuf};
use std::process::Command;

const TOKEN: &str = "ghs_mirrorTokenNeverOnDisk42";

fn creds() -> Credentials {
    Credentials {
        username: "x-access-token".into(),
        token: Secret::new(TOKEN),
    }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

/// A served repository with `commits` commits on main, each changing one
/// of a few files.
async fn served(root: &Path, name: &str, commits: usize) -> (GitHttpServer, PathBuf, String) {
    let bare = git_http::bare_repo(root, name, &[("README.md", "# app\n"), ("src/lib.py", "x = 0\n")]);
    for n in 1..commits {
        git_http::push_commit(
            &bare,
            "main",
            "src/lib.py",
            &format!("x = {n}\n"),
            &format!("change {n}"),
        );
    }
    let server = GitHttpServer::start(root, "x-access-token", TOKEN).await;
    let url = server.url(name);
    (server, bare, url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_branch_brings_only_its_new_objects_and_the_depth_holds() {
    let root = tempfile::tempdir().unwrap();
    let (_server, bare, url) = served(root.path(), "acme/app.git", 12).await;
    let state = tempfile::tempdir().unwrap();
    let mirrors = Mirrors::new(state.path().join("mirrors"), Some(5));

    let (m, u) = (mirrors.clone(), url.clone());
    let first = blocking(move || m.fetch(&u, &["main"], Some(&creds())).unwrap()).await;
    assert_eq!(first.tips["main"].to_string(), git_http::head_of(&bare, "main"));
    // Five commits of twelve: the mirror is shallow at the fifth.
    assert_eq!(first.shallow.len(), 1, "{:?}", first.shallow);
    let mirror = Repository::open_bare(&first.git_dir).unwrap();
    let mut walk = mirror.revwalk().unwrap();
    walk.push(first.tips["main"]).unwrap();
    assert_eq!(walk.count(), 5);

    git_http::push_commit(&bare, "main", "src/new.py", "y = 1\n", "one more");
    let (m, u) = (mirrors.clone(), url.clone());
    let second = blocking(move || m.fetch(&u, &["main"], Some(&creds())).unwrap()).await;
    assert_eq!(second.tips["main"].to_string(), git_http::head_of(&bare, "main"));
    assert_eq!(second.git_dir, first.git_dir);
    // A commit, its root tree, the `src` tree and the one new blob.
    assert!(
        (1..=4).contains(&second.received_objects),
        "{} objects fetched for one new commit (the first fetch took {})",
        second.received_objects,
        first.received_objects
    );
    // Nothing of the credential is kept in the mirror.
    let config = std::fs::read_to_string(first.git_dir.join("config")).unwrap();
    assert!(
        !config.contains(TOKEN) && !config.contains("x-access-token"),
        "{config}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_pushed_and_deleted_branches_are_followed() {
    let root = tempfile::tempdir().unwrap();
    let (_server, bare, url) = served(root.path(), "acme/app.git", 3).await;
    git_http::push_commit(&bare, "feature", "f.txt", "one\n", "feature work");
    let state = tempfile::tempdir().unwrap();
    let mirrors = Mirrors::new(state.path().join("mirrors"), Some(50));
    let (m, u) = (mirrors.clone(), url.clone());
    let first = blocking(move || m.fetch(&u, &["main", "feature"], Some(&creds())).unwrap()).await;
    assert!(first.tips.contains_key("feature"));

    // main rewritten to an unrelated history; feature deleted.
    let rewritten = tempfile::tempdir().unwrap();
    let other = git_http::bare_repo(rewritten.path(), "other.git", &[("NEW.md", "rewritten\n")]);
    git(
        &other,
        &["push", "-q", "--force", &bare.display().to_string(), "main:main"],
    );
    git(&bare, &["update-ref", "-d", "refs/heads/feature"]);

    let (m, u) = (mirrors.clone(), url.clone());
    let second = blocking(move || m.fetch(&u, &["main", "feature"], Some(&creds())).unwrap()).await;
    assert_eq!(second.tips["main"].to_string(), git_http::head_of(&bare, "main"));
    assert!(!second.tips.contains_key("feature"), "{:?}", second.tips);
    let mirror = Repository::open_bare(&second.git_dir).unwrap();
    assert!(
        mirror.find_reference("refs/heads/feature").is_err(),
        "the deleted branch is forgotten"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_mirror_is_made_again_by_the_next_fetch() {
    let root = tempfile::tempdir().unwrap();
    let (_server, bare, url) = served(root.path(), "acme/app.git", 4).await;
    let state = tempfile::tempdir().unwrap();
    let mirrors = Mirrors::new(state.path().join("mirrors"), Some(50));
    let (m, u) = (mirrors.clone(), url.clone());
    let first = blocking(move || m.fetch(&u, &["main"], Some(&creds())).unwrap()).await;

    // Its objects lost (a kill while a pack was written, a full disk):
    // the refs still claim main, so the forge sends nothing new.
    for pack in std::fs::read_dir(first.git_dir.join("objects/pack")).unwrap() {
        std::fs::remove_file(pack.unwrap().path()).unwrap();
    }
    let (m, u) = (mirrors.clone(), url.clone());
    let repaired = blocking(move || m.fetch(&u, &["main"], Some(&creds())).unwrap()).await;
    assert_eq!(
        repaired.tips["main"].to_string(),
        git_http::head_of(&bare, "main")
    );
    Repository::open_bare(&repaired.git_dir)
        .unwrap()
        .find_commit(repaired.tips["main"])
        .unwrap();

    // Not a repository at all any more (killed while it was made).
    std::fs::remove_file(first.git_dir.join("HEAD")).unwrap();
    std::fs::write(first.git_dir.join("config"), "[core\nbroken").unwrap();
    let (m, u) = (mirrors.clone(), url.clone());
    let remade = blocking(move || m.fetch(&u, &["main"], Some(&creds())).unwrap()).await;
    assert_eq!(remade.tips["main"].to_string(), git_http::head_of(&bare, "main"));
    assert_eq!(mirrors.list().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_repositories_with_the_same_objects_never_share_a_mirror() {
    let root = tempfile::tempdir().unwrap();
    let (server, _bare, url_a) = served(root.path(), "acme/app.git", 3).await;
    // A fork: the same objects under another name.
    git(
        root.path(),
        &["clone", "-q", "--bare", "acme/app.git", "other/app.git"],
    );
    let url_b = server.url("other/app.git");
    let state = tempfile::tempdir().unwrap();
    let mirrors = Mirrors::new(state.path().join("mirrors"), Some(50));
    let (m, a, b) = (mirrors.clone(), url_a.clone(), url_b.clone());
    let (first, second) = blocking(move || {
        (
            m.fetch(&a, &["main"], Some(&creds())).unwrap(),
            m.fetch(&b, &["main"], Some(&creds())).unwrap(),
        )
    })
    .await;
    assert_ne!(first.git_dir, second.git_dir);
    // The second fetched every object itself: nothing came from the first.
    assert_eq!(second.received_objects, first.received_objects);
    for fetched in [&first, &second] {
        assert!(!fetched.git_dir.join("objects/info/alternates").exists());
    }
    let listed: Vec<String> = mirrors.list().unwrap().into_iter().map(|m| m.url).collect();
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(listed.iter().all(|u| !u.contains(TOKEN)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_pack_gives_git_the_recent_commits_and_a_shallow_edge() {
    let root = tempfile::tempdir().unwrap();
    let (_server, bare, url) = served(root.path(), "acme/app.git", 30).await;
    let state = tempfile::tempdir().unwrap();
    let mirrors = Mirrors::new(state.path().join("mirrors"), Some(20));
    let (m, u) = (mirrors.clone(), url.clone());
    let fetched = blocking(move || m.fetch(&u, &["main"], Some(&creds())).unwrap()).await;
    let mirror = Repository::open_bare(&fetched.git_dir).unwrap();
    let tip = fetched.tips["main"];
    let out = tempfile::tempdir().unwrap();
    let pack =
        history_pack::write(&mirror, (&[tip], &[]), Some(10), &out.path().join("history.git")).unwrap();
    assert_eq!(pack.commits, 10);
    assert_eq!(pack.shallow.len(), 1);

    // A repository whose objects are only that pack, as in the sandbox.
    let work = out.path().join("work");
    git(out.path(), &["init", "-q", &work.display().to_string()]);
    std::fs::write(
        work.join(".git/objects/info/alternates"),
        format!("{}/objects\n", pack.dir.display()),
    )
    .unwrap();
    std::fs::write(work.join(".git/shallow"), pack.shallow_file()).unwrap();
    git(&work, &["update-ref", "refs/heads/main", &tip.to_string()]);
    git(&work, &["checkout", "-q", "main"]);
    assert_eq!(git(&work, &["rev-list", "--count", "HEAD"]), "10");
    assert_eq!(git(&work, &["rev-parse", "--is-shallow-repository"]), "true");
    git(&work, &["fsck", "--connectivity-only"]);
    git(&work, &["blame", "-s", "src/lib.py"]);
    assert_eq!(git(&work, &["log", "-1", "--format=%s"]), "change 29");
    let _ = bare;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirrors_are_listed_without_credentials_and_pruned_when_unused() {
    let root = tempfile::tempdir().unwrap();
    let (_server, _bare, url) = served(root.path(), "acme/app.git", 2).await;
    let state = tempfile::tempdir().unwrap();
    let mirrors = Mirrors::new(state.path().join("state/mirrors"), Some(50));
    let (m, u) = (mirrors.clone(), url.clone());
    let fetched = blocking(move || m.fetch(&u, &["main"], Some(&creds())).unwrap()).await;

    let config = state.path().join("config.yaml");
    std::fs::write(&config, "daemon:\n  state_dir: \"state\"\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_forgehand"))
        .arg("--config")
        .arg(&config)
        .args(["mirrors", "list"])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&url) && stdout.contains("1 mirror(s)"),
        "{stdout}"
    );
    assert!(!stdout.contains(TOKEN), "{stdout}");

    // Used an hour ago: kept for a day, removed after half an hour.
    let marker = std::fs::File::options()
        .write(true)
        .open(fetched.git_dir.join("forgehand-used"))
        .unwrap();
    marker
        .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(3600))
        .unwrap();
    assert!(mirrors
        .prune(std::time::Duration::from_secs(86400))
        .unwrap()
        .is_empty());
    assert!(fetched.git_dir.is_dir());
    let removed = mirrors.prune(std::time::Duration::from_secs(1800)).unwrap();
    assert_eq!(removed.len(), 1);
    assert!(!fetched.git_dir.exists());
    assert!(mirrors.list().unwrap().is_empty());
}
