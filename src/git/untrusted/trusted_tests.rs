//! A quarantine that reads the repository from the trusted stores: the
//! sandbox sends only what the task made, and only that counts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use std::fs;

fn sig() -> Signature<'static> {
    Signature::now("t", "t@example.com").unwrap()
}

/// A trusted repository whose one commit holds a blob of `big` bytes.
fn trusted_with_big_blob(dir: &Path, big: usize) -> (Repository, Oid) {
    let repo = Repository::init_bare(dir).unwrap();
    let mut builder = repo.treebuilder(None).unwrap();
    let noise: Vec<u8> = (0..big).map(|n| (n * 7919 % 251) as u8).collect();
    builder
        .insert("big.bin", repo.blob(&noise).unwrap(), 0o100644)
        .unwrap();
    builder
        .insert("a.txt", repo.blob(b"one\n").unwrap(), 0o100644)
        .unwrap();
    let base = {
        let tree = repo.find_tree(builder.write().unwrap()).unwrap();
        repo.commit(Some("refs/heads/main"), &sig(), &sig(), "base", &tree, &[])
            .unwrap()
    };
    drop(builder);
    (repo, base)
}

/// The sandbox's `.git` (tar under `g/`): the trusted history borrowed,
/// one new commit changing `a.txt`, its objects loose.
fn sandbox_commit_on(trusted: &Repository, base: Oid, sandbox: &Path) -> (Vec<u8>, Oid) {
    let repo = Repository::init_bare(sandbox).unwrap();
    fs::write(
        sandbox.join("objects/info/alternates"),
        format!("{}\n", trusted.path().join("objects").display()),
    )
    .unwrap();
    let repo = {
        drop(repo);
        Repository::open_bare(sandbox).unwrap()
    };
    let base_commit = repo.find_commit(base).unwrap();
    let mut builder = repo.treebuilder(Some(&base_commit.tree().unwrap())).unwrap();
    builder
        .insert("a.txt", repo.blob(b"two\n").unwrap(), 0o100644)
        .unwrap();
    let tree = repo.find_tree(builder.write().unwrap()).unwrap();
    let tip = repo
        .commit(
            Some("refs/heads/work"),
            &sig(),
            &sig(),
            "work",
            &tree,
            &[&base_commit],
        )
        .unwrap();
    let blob = repo.find_tree(tree.id()).unwrap().get_name("a.txt").unwrap().id();
    (git_tar(sandbox, tip, &[tip, tree.id(), blob]), tip)
}

/// A `.git` tar (under `g/`) with `work` at `tip` and the loose `objects`.
fn git_tar(sandbox: &Path, tip: Oid, objects: &[Oid]) -> Vec<u8> {
    let mut tar = tar::Builder::new(Vec::new());
    let mut add = |name: &str, bytes: &[u8]| {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut header, name, bytes).unwrap();
    };
    add("g/HEAD", b"ref: refs/heads/work\n");
    add("g/refs/heads/work", format!("{tip}\n").as_bytes());
    // Its alternates name a sandbox path: never read.
    add("g/objects/info/alternates", b"/workspace/history.git/objects\n");
    for oid in objects {
        let hex = oid.to_string();
        let loose = fs::read(sandbox.join("objects").join(&hex[..2]).join(&hex[2..])).unwrap();
        add(&format!("g/objects/{}/{}", &hex[..2], &hex[2..]), &loose);
    }
    tar.into_inner().unwrap()
}

/// `take_since` of a `.git` tar on `base`, reading the rest from `trusted`.
fn take_on(
    tar: &[u8],
    into: &Path,
    limits: &Limits,
    base: Oid,
    trusted: &[PathBuf],
) -> Result<Quarantined, UntrustedError> {
    take_since(
        tar,
        Layout::GitDir,
        "work",
        into,
        limits,
        None,
        (&[base], trusted),
    )
}

#[test]
fn only_what_the_task_made_counts_against_the_caps() {
    let dir = tempfile::tempdir().unwrap();
    let (trusted, base) = trusted_with_big_blob(&dir.path().join("trusted.git"), 2 << 20);
    let (tar, tip) = sandbox_commit_on(&trusted, base, &dir.path().join("sandbox.git"));
    let limits = Limits {
        bytes: 1 << 20,
        ..Limits::default()
    };
    let objects = vec![trusted.path().join("objects")];
    let taken = take_on(&tar, &dir.path().join("q.git"), &limits, base, &objects).unwrap();
    assert_eq!(taken.head, tip);
    // The 2 MiB blob stayed in the trusted store: nothing of it was written.
    let written: u64 = walk_sizes(&dir.path().join("q.git/objects"));
    assert!(written < 64 << 10, "{written} bytes written into the quarantine");
}

#[test]
fn without_the_trusted_stores_the_same_result_is_incomplete() {
    let dir = tempfile::tempdir().unwrap();
    let (trusted, base) = trusted_with_big_blob(&dir.path().join("trusted.git"), 4 << 10);
    let (tar, _) = sandbox_commit_on(&trusted, base, &dir.path().join("sandbox.git"));
    let err = take_on(&tar, &dir.path().join("q.git"), &Limits::default(), base, &[])
        .err()
        .expect("the sandbox's own alternates are never followed");
    assert!(matches!(err, UntrustedError::Refused(_)), "{err}");
}

#[test]
fn a_trusted_blob_named_as_a_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (trusted, base) = trusted_with_big_blob(&dir.path().join("trusted.git"), 4 << 10);
    let blob = trusted
        .find_commit(base)
        .unwrap()
        .tree()
        .unwrap()
        .get_name("a.txt")
        .unwrap()
        .id();
    // A tree written byte by byte (libgit2 would refuse to build it) naming
    // the trusted blob as a folder.
    let sandbox_dir = dir.path().join("sandbox.git");
    let sandbox = Repository::init_bare(&sandbox_dir).unwrap();
    let mut raw = b"40000 folder\0".to_vec();
    raw.extend_from_slice(blob.as_bytes());
    let tree = sandbox
        .odb()
        .unwrap()
        .write(git2::ObjectType::Tree, &raw)
        .unwrap();
    let text = format!(
        "tree {tree}\nparent {base}\nauthor t <t@example.com> 0 +0000\ncommitter t <t@example.com> 0 +0000\n\nwork\n"
    );
    let tip = sandbox
        .odb()
        .unwrap()
        .write(git2::ObjectType::Commit, text.as_bytes())
        .unwrap();
    let tar = git_tar(&sandbox_dir, tip, &[tip, tree]);
    let trusted_objects = [trusted.path().join("objects")];
    let err = take_on(
        &tar,
        &dir.path().join("q.git"),
        &Limits::default(),
        base,
        &trusted_objects,
    )
    .err()
    .expect("a blob is no folder, trusted or not");
    assert!(err.to_string().contains("wrong kind"), "{err}");
}

fn walk_sizes(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in fs::read_dir(dir).unwrap().flatten() {
        let meta = entry.metadata().unwrap();
        total += if meta.is_dir() {
            walk_sizes(&entry.path())
        } else {
            meta.len()
        };
    }
    total
}
