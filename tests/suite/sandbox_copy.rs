//! Copying a workspace into a sandbox and back: through the engine's
//! archive API, and over the supervisor's session when it runs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support as common;
use forgehand_test_support::sandbox_tree;

use std::fs;
use std::io::Write;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

fn make_tree(root: &Path) {
    fs::create_dir_all(root.join("src/deep/er")).unwrap();
    fs::write(root.join("src/deep/er/mod.rs"), "pub fn f() {}\n").unwrap();
    fs::write(root.join("README.md"), "# 日本語のテキスト\n").unwrap();
    fs::write(root.join("build.sh"), "#!/bin/sh\necho built\n").unwrap();
    fs::set_permissions(root.join("build.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    symlink("src/deep/er/mod.rs", root.join("link-to-mod")).unwrap();
    fs::create_dir(root.join("empty-dir")).unwrap();
    // 50 MB of varied bytes.
    let mut big = fs::File::create(root.join("big.bin")).unwrap();
    let block: Vec<u8> = (0..1024 * 1024).map(|i| (i * 7 % 251) as u8).collect();
    for _ in 0..50 {
        big.write_all(&block).unwrap();
    }
}

fn assert_same_tree(a: &Path, b: &sandbox_tree::Tree) {
    for rel in ["src/deep/er/mod.rs", "README.md", "build.sh", "big.bin"] {
        assert!(fs::read(a.join(rel)).unwrap() == b.bytes(rel), "{rel} differs");
    }
    assert_eq!(b.mode("build.sh") & 0o111, 0o111);
    assert_eq!(b.mode("README.md") & 0o111, 0);
    assert_eq!(b.link("link-to-mod"), "src/deep/er/mod.rs");
    assert!(b.is_dir("empty-dir"));
}

#[tokio::test]
async fn a_tree_round_trips_through_the_sandbox() {
    let host = tempfile::tempdir().unwrap();
    let src = host.path().join("src-tree");
    make_tree(&src);
    let (backend, _) = common::backend().await;
    let sandbox = common::base_sandbox(&backend, Some(&src)).await;

    // Inside: owned by the sandbox user, exec bit works, symlink is a symlink.
    let out = sandbox
        .exec(
            "stat -c '%u:%g' build.sh big.bin && ./build.sh && readlink link-to-mod && wc -c < big.bin",
            None,
        )
        .await
        .unwrap();
    assert!(out.success(), "{out:?}");
    assert_eq!(
        out.stdout.lines().collect::<Vec<_>>(),
        vec![
            "1000:1000",
            "1000:1000",
            "built",
            "src/deep/er/mod.rs",
            "52428800"
        ]
    );
    // The model's edits come back out.
    let out = sandbox
        .exec(
            "echo changed >> README.md && mkdir -p new/dir && echo x > new/dir/file",
            None,
        )
        .await
        .unwrap();
    assert!(out.success(), "{out:?}");

    let back = sandbox_tree::read(sandbox.as_ref(), sandbox.project_dir())
        .await
        .unwrap();
    fs::write(src.join("README.md"), "# 日本語のテキスト\nchanged\n").unwrap();
    assert_same_tree(&src, &back);
    assert_eq!(back.text("new/dir/file"), "x\n");
    sandbox.remove().await.unwrap();
}

#[tokio::test]
async fn a_link_the_model_made_comes_out_as_its_text_and_nothing_is_written_on_the_host() {
    let host = tempfile::tempdir().unwrap();
    let (backend, _) = common::backend().await;
    let sandbox = common::base_sandbox(&backend, None).await;
    let target = host.path().join("victim");
    fs::create_dir(&target).unwrap();
    let cmd = format!(
        "mkdir -p /workspace/project && ln -s {} /workspace/project/escape && echo ok",
        target.display()
    );
    assert!(sandbox.exec(&cmd, None).await.unwrap().success());
    let back = sandbox_tree::read(sandbox.as_ref(), "/workspace/project")
        .await
        .unwrap();
    // The link is data: its target's text, never a path the host follows.
    assert_eq!(back.link("escape"), target.display().to_string());
    assert_eq!(fs::read_dir(&target).unwrap().count(), 0);
    sandbox.remove().await.unwrap();
}

#[tokio::test]
async fn reading_out_a_missing_path_is_a_clear_error() {
    let (backend, _) = common::backend().await;
    let sandbox = common::base_sandbox(&backend, None).await;
    let err = sandbox_tree::read(sandbox.as_ref(), "/workspace/nope")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("/workspace/nope") && err.contains("no such path"),
        "{err}"
    );
    sandbox.remove().await.unwrap();
}

/// The same round trip with the supervisor running: the copy in streams
/// into `forgehand-editor untar` over its session instead of the engine's
/// archive API, with the same owner, modes and links.
#[tokio::test]
async fn a_tree_round_trips_over_the_supervisor_and_a_second_copy_replaces_the_first() {
    let host = tempfile::tempdir().unwrap();
    let src = host.path().join("src-tree");
    make_tree(&src);
    let (backend, _) = common::backend().await;
    let backend = backend.with_editor(common::editor_binary());
    let sandbox = common::base_sandbox(&backend, Some(&src)).await;
    assert!(sandbox.egress().is_some(), "the supervisor runs");
    let out = sandbox
        .exec(
            "stat -c '%u:%g' build.sh big.bin && ./build.sh && readlink link-to-mod && wc -c < big.bin",
            None,
        )
        .await
        .unwrap();
    assert!(out.success(), "{out:?}");
    assert_eq!(
        out.stdout.lines().collect::<Vec<_>>(),
        vec![
            "1000:1000",
            "1000:1000",
            "built",
            "src/deep/er/mod.rs",
            "52428800"
        ]
    );
    // Copied again into the same folder (a rebase's moved upstream is): the
    // new files replace the old ones.
    fs::write(src.join("README.md"), "second\n").unwrap();
    sandbox.copy_in(&src, sandbox.project_dir()).await.unwrap();
    let back = sandbox_tree::read(sandbox.as_ref(), sandbox.project_dir())
        .await
        .unwrap();
    assert_same_tree(&src, &back);
    // A folder that does not exist is a clear error, before anything runs.
    let missing = host.path().join("missing");
    let err = sandbox
        .copy_in(&missing, "/workspace/other")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("check that the workspace was cloned"), "{err}");
    sandbox.remove().await.unwrap();
}
