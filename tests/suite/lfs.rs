//! Git LFS repositories, end to end against an LFS server that speaks the
//! batch API (`forgehand_test_support::fake_lfs`) and `git lfs` itself as
//! the judge of what was pushed: the agent sees LFS files' content (up to
//! the cap; the rest stay pointers and it is told which), an edited and a
//! new LFS file land as pointers whose objects the server has, unchanged
//! ones keep their very pointer blobs, a server that refuses the upload
//! leaves nothing pushed, a host not allowed is never contacted, and a
//! failed download from a signed storage address never shows its query.
//! The LFS server (and the storage) are on other ports of the forge's
//! host, so they are listed in `git.lfs.allowed_hosts`: the forge's own
//! origin includes its port. A follow-up never reads the `.lfsconfig` the
//! model pushed, and an `lfs.url` with a query is refused.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::fake_lfs::{pointer_text, FakeLfs, DOWNLOAD_SIGNATURE};
use forgehand_test_support::github_world::{Ended, World, DONE, REPO, TOKEN};
use forgehand_test_support::scripted_model::{call, text, Reply};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;

const WEIGHTS: &str = "weights-v1: 0.25 0.5 0.75\n";
const LABELS: &str = "cat\ndog\nbird\n";

fn big() -> String {
    "0123456789abcdef\n".repeat(200)
}

/// The repository's files: three LFS files (one over the 1 KiB cap the
/// tests set) stored on `lfs`, whose endpoint `.lfsconfig` names.
fn lfs_repository(lfs: &FakeLfs, endpoint: &str) -> Vec<(String, String)> {
    vec![
        (
            ".gitattributes".into(),
            "*.bin filter=lfs diff=lfs merge=lfs -text\n".into(),
        ),
        (".lfsconfig".into(), format!("[lfs]\n\turl = {endpoint}\n")),
        ("data/weights.bin".into(), lfs.put(WEIGHTS.as_bytes())),
        ("data/labels.bin".into(), lfs.put(LABELS.as_bytes())),
        ("data/big.bin".into(), lfs.put(big().as_bytes())),
        ("greet.py".into(), "print('Hello')\n".into()),
    ]
}

/// A world whose repository holds `files`, with `lfs` (on its own port
/// of the forge's host) allowed and `more` top-level YAML.
async fn world_with(
    lfs: &FakeLfs,
    turns: Vec<(Reply, Option<Duration>)>,
    files: &[(String, String)],
    more: &str,
) -> World {
    world_allowing(lfs, &[], turns, files, more).await
}

/// The same, with more `host:port`s allowed besides `lfs`.
async fn world_allowing(
    lfs: &FakeLfs,
    hosts: &[String],
    turns: Vec<(Reply, Option<Duration>)>,
    files: &[(String, String)],
    more: &str,
) -> World {
    let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
    let mut allowed = vec![format!("\"127.0.0.1:{}\"", lfs.server.address().port())];
    allowed.extend(hosts.iter().map(|h| format!("\"{h}\"")));
    let yaml = format!(
        "git:\n  lfs:\n    max_total_bytes: \"1k\"\n    allowed_hosts: [{}]\n{more}",
        allowed.join(", ")
    );
    World::with_repository(turns, &files, &yaml).await
}

async fn world(lfs: &FakeLfs, turns: Vec<(Reply, Option<Duration>)>, files: &[(String, String)]) -> World {
    world_with(lfs, turns, files, "").await
}

fn shell(command: &str) -> (Reply, Option<Duration>) {
    (
        call("command_executor_execute_command", json!({"command": command})),
        None,
    )
}

/// Look at the LFS files, edit one, add one, commit.
fn edit_lfs_files() -> Vec<(Reply, Option<Duration>)> {
    vec![
        shell("cat data/weights.bin data/labels.bin; head -c 60 data/big.bin"),
        (
            call(
                "text_editor_str_replace",
                json!({"path": "/workspace/project/data/weights.bin", "old_str": "weights-v1", "new_str": "weights-v2"}),
            ),
            None,
        ),
        (
            call(
                "text_editor_create",
                json!({"path": "/workspace/project/data/extra.bin", "file_text": "brand new weights\n"}),
            ),
            None,
        ),
        shell("git add -A && git commit -qm 'Retrain the weights' && git log --oneline -2"),
        (text("Retrained the weights and added extra weights."), None),
    ]
}

/// The blob at `path` on `branch` of the bare repository.
fn blob_at(bare: &std::path::Path, branch: &str, path: &str) -> (git2::Oid, Vec<u8>) {
    let repo = git2::Repository::open_bare(bare).unwrap();
    let tree = repo
        .find_reference(&format!("refs/heads/{branch}"))
        .unwrap()
        .peel_to_tree()
        .unwrap();
    let entry = tree.get_path(std::path::Path::new(path)).unwrap();
    let blob = repo.find_blob(entry.id()).unwrap();
    (entry.id(), blob.content().to_vec())
}

fn oid_of(pointer: &[u8]) -> String {
    let text = String::from_utf8(pointer.to_vec()).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("oid sha256:"))
        .unwrap_or_else(|| panic!("not a pointer: {text}"))
        .to_owned()
}

/// What the model was shown, all requests joined.
async fn seen(world: &World) -> String {
    world
        .model
        .requests()
        .await
        .iter()
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_sees_lfs_content_and_edits_land_as_pointers_the_server_has() {
    let lfs = FakeLfs::start("x-access-token", TOKEN).await;
    let files = lfs_repository(&lfs, &lfs.endpoint(REPO));
    let world = world(&lfs, edit_lfs_files(), &files).await;
    let Ended { issue, mut daemon } = world.run_to_end("Retrain the weights").await;
    assert!(daemon.terminate().success());
    let log = std::fs::read_to_string(world.log_path()).unwrap();
    assert_eq!(
        world.github.issue(REPO, issue).labels,
        vec![DONE.to_owned()],
        "{log}"
    );

    // The agent read the content of the LFS files under the cap, and was
    // told which one stayed a pointer and why.
    let seen = seen(&world).await;
    assert!(seen.contains("weights-v1: 0.25"), "{seen}");
    assert!(seen.contains("cat\\ndog\\nbird"), "{seen}");
    assert!(seen.contains("These LFS files are only pointers here"), "{seen}");
    assert!(
        seen.contains("data/big.bin (3400 bytes; over git.lfs.max_total_bytes"),
        "{seen}"
    );
    assert!(
        seen.contains("version https://git-lfs.github.com/spec/v1"),
        "big.bin's pointer: {seen}"
    );
    assert!(
        world
            .progress_comment(issue)
            .contains("Git LFS: 2 file(s) fetched"),
        "{}",
        world.progress_comment(issue)
    );

    // Edited and new LFS files are pointers whose objects the server has.
    let branch = format!("forgehand/issue-{issue}");
    for (path, content) in [
        ("data/weights.bin", "weights-v2: 0.25 0.5 0.75\n"),
        ("data/extra.bin", "brand new weights\n"),
    ] {
        let (_, pointer) = blob_at(&world.bare, &branch, path);
        assert_eq!(
            String::from_utf8(pointer.clone()).unwrap(),
            pointer_text(content.as_bytes()),
            "{path}"
        );
        assert_eq!(
            lfs.object(&oid_of(&pointer)).as_deref(),
            Some(content.as_bytes()),
            "{path}"
        );
    }
    // Unchanged ones keep the very blobs main has.
    for path in ["data/labels.bin", "data/big.bin"] {
        assert_eq!(
            blob_at(&world.bare, &branch, path).0,
            blob_at(&world.bare, "main", path).0,
            "{path}"
        );
    }
    // The commit changes exactly the two files.
    let changed = std::process::Command::new("git")
        .args([
            "-C",
            world.bare.to_str().unwrap(),
            "diff",
            "--name-only",
            "main",
            &branch,
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&changed.stdout),
        "data/extra.bin\ndata/weights.bin\n"
    );

    // git-lfs itself finds every LFS file a pointer.
    let fsck = std::process::Command::new("git")
        .args([
            "-C",
            world.bare.to_str().unwrap(),
            "lfs",
            "fsck",
            "--pointers",
            &branch,
        ])
        .output()
        .expect("git-lfs is installed (scripts/dev-env.sh)");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&fsck.stdout),
        String::from_utf8_lossy(&fsck.stderr)
    );
    assert!(fsck.status.success(), "{said}");
    assert!(!said.contains("should have been pointers"), "{said}");
    assert_eq!(lfs.unknown_requests(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_upload_leaves_nothing_pushed_and_the_task_says_why() {
    let lfs = FakeLfs::start("x-access-token", TOKEN).await;
    lfs.refuse_uploads();
    let files = lfs_repository(&lfs, &lfs.endpoint(REPO));
    let world = world(&lfs, edit_lfs_files(), &files).await;
    let Ended { issue, mut daemon } = world.run_to_end("Retrain the weights").await;
    assert!(daemon.terminate().success());
    assert!(
        world
            .github
            .issue(REPO, issue)
            .labels
            .contains(&"coding agent failed".to_owned()),
        "{:?}",
        world.github.issue(REPO, issue).labels
    );
    let comment = world.progress_comment(issue);
    assert!(
        comment.contains("nothing was pushed: the Git LFS upload failed"),
        "{comment}"
    );
    assert!(
        comment.contains("write access to this repository's LFS storage is denied"),
        "{comment}"
    );
    let repo = git2::Repository::open_bare(&world.bare).unwrap();
    assert!(
        repo.find_reference(&format!("refs/heads/forgehand/issue-{issue}"))
            .is_err(),
        "the branch must not be pushed"
    );
    assert!(world.github.pulls(REPO).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_lfs_host_not_allowed_is_never_contacted() {
    let lfs = FakeLfs::start("x-access-token", TOKEN).await;
    // The same server by another name: not the forge's host (127.0.0.1).
    let elsewhere = lfs.endpoint(REPO).replace("127.0.0.1", "localhost");
    let files = lfs_repository(&lfs, &elsewhere);
    let turns = vec![
        shell("head -c 42 data/weights.bin"),
        (text("The weights are LFS pointers I cannot read."), None),
    ];
    let world = world(&lfs, turns, &files).await;
    let Ended { mut daemon, .. } = world.run_to_end("Look at the weights").await;
    assert!(daemon.terminate().success());
    let seen = seen(&world).await;
    assert!(
        seen.contains(
            "data/weights.bin (the host localhost is neither the forge's nor in git.lfs.allowed_hosts"
        ),
        "{seen}"
    );
    assert!(seen.contains("version https://git-lfs.git"), "{seen}");
    assert_eq!(
        lfs.requests(),
        Vec::<String>::new(),
        "the LFS server was contacted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_never_sends_the_token_where_the_models_lfsconfig_points() {
    let lfs = FakeLfs::start("x-access-token", TOKEN).await;
    // The model's server: the forge's host, another port.
    let other = FakeLfs::start("x-access-token", TOKEN).await;
    let mut files = lfs_repository(&lfs, &lfs.endpoint(REPO));
    files.push(("README.md".into(), "# app\n".into()));
    let repoint = format!(
        "printf '[lfs]\\n\\turl = {}\\n' > .lfsconfig && echo '# again' >> greet.py \
         && git add -A && git commit -qm 'Move the LFS endpoint'",
        other.endpoint(REPO)
    );
    let turns = vec![
        shell("head -c 30 data/weights.bin; echo; echo lfs-shown"),
        shell(&repoint),
        (text("Moved the LFS endpoint."), None),
    ];
    let world = world_with(&lfs, turns, &files, "triggers:\n  review_quiet: \"2s\"\n").await;
    let issue = world.labelled_issue("Move the LFS endpoint");
    let mut daemon = world.start();
    let pull = world.follow_up_by_review(issue, &daemon, "README.md").await;
    assert!(daemon.terminate().success());

    // The model did push the other endpoint.
    let branch = format!("forgehand/issue-{issue}");
    let (_, pushed) = blob_at(&world.bare, &branch, ".lfsconfig");
    assert!(
        String::from_utf8_lossy(&pushed).contains(&other.endpoint(REPO)),
        "{}",
        String::from_utf8_lossy(&pushed)
    );
    // The follow-up fetched the LFS files from the default branch's
    // endpoint (one batch per run), and the model's server got nothing.
    assert_eq!(
        other.requests(),
        Vec::<String>::new(),
        "the token went to the model's endpoint"
    );
    let batches = lfs
        .requests()
        .iter()
        .filter(|r| r.contains("/objects/batch"))
        .count();
    assert!(
        batches >= 2,
        "{:?}\n{}",
        lfs.requests(),
        world.progress_comment(pull)
    );
    let seen = seen(&world).await;
    assert!(seen.contains("weights-v1: 0.25"), "{seen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_lfs_url_with_a_query_is_refused_and_the_server_gets_nothing() {
    let lfs = FakeLfs::start("x-access-token", TOKEN).await;
    // `?x=` would make the appended `/objects/batch` part of the query:
    // the request, with the token, would go to the path before it.
    let files = lfs_repository(&lfs, &format!("{}?x=", lfs.endpoint(REPO)));
    let turns = vec![
        shell("head -c 42 data/weights.bin"),
        (text("The weights are LFS pointers I cannot read."), None),
    ];
    let world = world(&lfs, turns, &files).await;
    let Ended { mut daemon, .. } = world.run_to_end("Look at the weights").await;
    assert!(daemon.terminate().success());
    let seen = seen(&world).await;
    assert!(
        seen.contains(
            "data/weights.bin (the LFS endpoint cannot be used: lfs.url in the default branch's .lfsconfig"
        ),
        "{seen}"
    );
    assert!(seen.contains("has a query (`?`) or a fragment (`#`)"), "{seen}");
    assert!(!seen.contains("x=/objects/batch"), "{seen}");
    assert_eq!(
        lfs.requests(),
        Vec::<String>::new(),
        "the LFS server was contacted"
    );
}

/// Object storage that reads each request and closes the connection
/// unanswered: its base URL, and the request heads it read.
async fn closing_storage() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let lines = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            lines
                .lock()
                .unwrap()
                .push(String::from_utf8_lossy(&head).into_owned());
            drop(stream);
        }
    });
    (base, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_download_from_a_signed_address_never_shows_its_query() {
    let lfs = FakeLfs::start("x-access-token", TOKEN).await;
    let (storage, storage_saw) = closing_storage().await;
    lfs.sign_downloads_at(&storage);
    let files = lfs_repository(&lfs, &lfs.endpoint(REPO));
    let turns = vec![
        shell("head -c 42 data/weights.bin"),
        (text("The weights are LFS pointers I cannot read."), None),
    ];
    let host = storage.trim_start_matches("http://").to_owned();
    let world = world_allowing(&lfs, &[host], turns, &files, "").await;
    let Ended { issue, mut daemon } = world.run_to_end("Look at the weights").await;
    assert!(daemon.terminate().success());
    // The daemon did go to the signed address, query and all.
    let asked = storage_saw.lock().unwrap().clone();
    assert!(
        asked
            .iter()
            .any(|head| head.starts_with("GET /objects/") && head.contains(DOWNLOAD_SIGNATURE)),
        "{asked:?}"
    );
    // Storage at another origin than the LFS server's gets the signed
    // address alone, never the forge's token.
    assert!(
        asked
            .iter()
            .all(|head| !head.to_ascii_lowercase().contains("authorization")),
        "{asked:?}"
    );
    let comment = world.progress_comment(issue);
    let oid = oid_of(pointer_text(WEIGHTS.as_bytes()).as_bytes());
    let said = format!("data/weights.bin (cannot reach the LFS server at {storage}/objects/{oid}");
    assert!(comment.contains(&said), "{comment}");
    let seen = seen(&world).await;
    let log = std::fs::read_to_string(world.log_path()).unwrap();
    for (place, text) in [("comment", &comment), ("model's view", &seen), ("log", &log)] {
        assert!(
            !text.contains("X-Amz-"),
            "the signed query is in the {place}: {text}"
        );
    }
}
