//! The text editor inside real sandboxes: injected into images that have
//! nothing for it, driven through the MCP client over the exec stream, and
//! restarted when it dies.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support as common;
use forgehand_test_support::sandbox_tree;

use bollard::query_parameters::BuildImageOptionsBuilder;
use forgehand::config::TextEditorMcpConfig;
use forgehand::mcp::{text_editor, McpClient, McpError, SandboxedServer};
use forgehand::sandbox::docker::DockerBackend;
use forgehand::sandbox::helper;
use forgehand::sandbox::{Sandbox, SandboxBackend};
use futures_util::StreamExt;
use serde_json::{json, Map, Value};
use std::path::Path;
use std::sync::Arc;
use tokio::sync::OnceCell;

fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => panic!("arguments must be an object"),
    }
}

fn editor_config() -> TextEditorMcpConfig {
    common::shipped_config().text_editor_mcp
}

async fn backend_with_editor() -> DockerBackend {
    let (backend, _) = common::backend().await;
    backend.with_editor(common::editor_binary())
}

/// Builds a test image from a Dockerfile and extra files, through the API.
async fn build_test_image(tag: &str, dockerfile: &str, files: &[(&str, Vec<u8>, u32)]) {
    let docker = common::docker().await;
    let mut builder = tar::Builder::new(Vec::new());
    let mut add = |name: &str, data: &[u8], mode: u32| {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(mode);
        header.set_entry_type(tar::EntryType::Regular);
        builder.append_data(&mut header, name, data).unwrap();
    };
    add("Dockerfile", dockerfile.as_bytes(), 0o644);
    for (name, data, mode) in files {
        add(name, data, *mode);
    }
    let context = builder.into_inner().unwrap();
    let options = BuildImageOptionsBuilder::default().t(tag).rm(true).build();
    let mut stream = docker.build_image(options, None, Some(bollard::body_full(context.into())));
    while let Some(item) = stream.next().await {
        item.unwrap_or_else(|e| panic!("building {tag}: {e}"));
    }
}

static TEST_IMAGES: OnceCell<()> = OnceCell::const_new();

/// `forgehand-test/shell-only` (a static busybox as /bin/sh, nothing else) and
/// `forgehand-test/empty` (one data file: no shell, no libc, no sleep).
async fn ensure_test_images() {
    TEST_IMAGES
        .get_or_init(|| async {
            let busybox = std::fs::read("/bin/busybox")
                .expect("/bin/busybox (Debian's busybox-static) is needed; run scripts/dev-env.sh");
            build_test_image(
                "forgehand-test/shell-only:latest",
                "FROM scratch\nCOPY busybox /bin/sh\n",
                &[("busybox", busybox, 0o755)],
            )
            .await;
            build_test_image(
                "forgehand-test/empty:latest",
                "FROM scratch\nCOPY marker /marker\n",
                &[("marker", b"nothing to run here\n".to_vec(), 0o644)],
            )
            .await;
        })
        .await;
}

fn workspace_with_readme() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("README.md"), "# Project\nold line\n").unwrap();
    dir
}

/// A whole edit session through the MCP client; returns the project afterwards.
async fn edit_session(sandbox: Arc<dyn Sandbox>) -> sandbox_tree::Tree {
    let server = text_editor::start(sandbox.clone(), &editor_config())
        .await
        .unwrap();
    let tools = server.list_tools().await.unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "text_editor");
    let readme = "/workspace/project/README.md";
    let call = |value: Value| server.call_tool("text_editor", args(value));
    let out = call(json!({"command": "view", "path": readme})).await.unwrap();
    assert!(!out.is_error && out.text.contains("     2\told line"), "{out:?}");
    let out =
        call(json!({"command": "str_replace", "path": readme, "old_str": "old line", "new_str": "new line"}))
            .await
            .unwrap();
    assert!(!out.is_error, "{out:?}");
    let out = call(json!({"command": "insert", "path": readme, "insert_line": 2, "new_str": "added"}))
        .await
        .unwrap();
    assert!(!out.is_error, "{out:?}");
    let out = call(
        json!({"command": "create", "path": "/workspace/project/src/lib.rs", "file_text": "pub fn f() {}\n"}),
    )
    .await
    .unwrap();
    assert!(!out.is_error, "{out:?}");
    let out = call(json!({"command": "create", "path": "/workspace/project/tmp.txt", "file_text": "x"}))
        .await
        .unwrap();
    assert!(!out.is_error, "{out:?}");
    let out = call(json!({"command": "undo_edit", "path": "/workspace/project/tmp.txt"}))
        .await
        .unwrap();
    assert!(!out.is_error, "{out:?}");
    let out = call(json!({"command": "view", "path": "/workspace/.forgehand/bin/forgehand-editor"}))
        .await
        .unwrap();
    assert!(
        out.is_error && out.text.contains("outside the project folder"),
        "{out:?}"
    );
    server.shutdown().await;

    sandbox_tree::read(sandbox.as_ref(), "/workspace/project")
        .await
        .unwrap()
}

fn assert_edited(out: &sandbox_tree::Tree) {
    assert_eq!(out.text("README.md"), "# Project\nnew line\nadded\n");
    assert_eq!(out.text("src/lib.rs"), "pub fn f() {}\n");
    assert!(!out.0.contains_key("tmp.txt"));
}

/// A sandbox from `image` with the editor and `workspace` in its project.
async fn editor_sandbox(image: &str, workspace: &Path) -> (DockerBackend, Arc<dyn Sandbox>) {
    let backend = backend_with_editor().await;
    let sandbox = backend
        .prepare(&common::spec(image), Some(workspace))
        .await
        .unwrap();
    (backend, Arc::from(sandbox))
}

/// A sandbox from a test image (which lacks the editor) with a README.
async fn injected_sandbox(image: &str) -> (DockerBackend, Arc<dyn Sandbox>) {
    ensure_test_images().await;
    editor_sandbox(image, workspace_with_readme().path()).await
}

/// A sandbox from forgehand's base image (which carries the editor) with a README.
async fn base_sandbox() -> Arc<dyn Sandbox> {
    common::ensure_images().await;
    editor_sandbox(&common::base_image(), workspace_with_readme().path())
        .await
        .1
}

#[tokio::test]
async fn the_editor_is_injected_into_an_image_with_nothing_but_a_shell() {
    let (backend, sandbox) = injected_sandbox("forgehand-test/shell-only:latest").await;
    let injected = "/workspace/.forgehand/bin/forgehand-editor";
    assert_eq!(sandbox.editor_path(), Some(injected));
    // The injected editor is the container's idle main process.
    let info = backend
        .docker()
        .inspect_container(sandbox.id(), None)
        .await
        .unwrap();
    assert_eq!(
        info.config.unwrap().cmd.unwrap(),
        vec![injected.to_owned(), "idle".to_owned()]
    );
    let out = sandbox.exec("echo shell works", None).await.unwrap();
    assert_eq!(out.stdout, "shell works\n", "{out:?}");
    let host = edit_session(sandbox.clone()).await;
    assert_edited(&host);
    sandbox.remove().await.unwrap();
}

#[tokio::test]
async fn the_editor_is_injected_into_an_image_without_a_shell_or_libc() {
    let (_backend, sandbox) = injected_sandbox("forgehand-test/empty:latest").await;
    let host = edit_session(sandbox.clone()).await;
    assert_edited(&host);
    // The command executor says clearly that there is no shell.
    let out = sandbox.exec("true", None).await.unwrap();
    assert!(!out.success(), "{out:?}");
    sandbox.remove().await.unwrap();
}

#[tokio::test]
async fn forgehands_own_images_start_without_the_copy() {
    let sandbox = base_sandbox().await;
    assert_eq!(sandbox.editor_path(), Some(helper::IMAGE_PATH));
    let out = sandbox
        .exec(
            "test -e /workspace/.forgehand && echo copied || echo not-copied",
            None,
        )
        .await
        .unwrap();
    assert_eq!(out.stdout, "not-copied\n");
    let host = edit_session(sandbox.clone()).await;
    assert_edited(&host);
    sandbox.remove().await.unwrap();
}

#[tokio::test]
async fn a_server_killed_mid_session_gives_a_clear_error_and_one_restart() {
    let sandbox = base_sandbox().await;
    let server: SandboxedServer = text_editor::start(sandbox.clone(), &editor_config())
        .await
        .unwrap();
    let view = || args(json!({"command": "view", "path": "/workspace/project/README.md"}));
    assert!(!server.call_tool("text_editor", view()).await.unwrap().is_error);

    // Anchored, so it does not match the shell that runs pkill.
    let kill = "pkill -KILL -f '^/usr/local/bin/forgehand-editor --root' && echo killed";
    assert_eq!(sandbox.exec(kill, None).await.unwrap().stdout, "killed\n");
    let err = server.call_tool("text_editor", view()).await.unwrap_err();
    assert!(
        matches!(err, McpError::ServerDied { restarted: true, .. }),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("text-editor") && text.contains("stopped") && text.contains("restarted"),
        "{text}"
    );
    assert!(err.is_retryable());
    // The restarted server works.
    let out = server.call_tool("text_editor", view()).await.unwrap();
    assert!(!out.is_error && out.text.contains("old line"), "{out:?}");

    // A second death: no restart is left, and the error says so.
    assert_eq!(sandbox.exec(kill, None).await.unwrap().stdout, "killed\n");
    let err = server.call_tool("text_editor", view()).await.unwrap_err();
    assert!(
        matches!(err, McpError::ServerDied { restarted: false, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("could not be restarted"), "{err}");
    let err = server.call_tool("text_editor", view()).await.unwrap_err();
    assert!(
        matches!(err, McpError::ServerDied { restarted: false, .. }),
        "{err}"
    );
    sandbox.remove().await.unwrap();
}

#[tokio::test]
async fn an_operator_command_runs_instead_of_the_built_in_server() {
    common::ensure_images().await;
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join("long.txt"), "a line of text\n".repeat(200)).unwrap();
    let (_backend, sandbox) = editor_sandbox(&common::base_image(), workspace.path()).await;
    let mut config = editor_config();
    config.command = [
        "/usr/local/bin/forgehand-editor",
        "--root",
        "/workspace/project",
        "--max-view-bytes",
        "300",
    ]
    .map(String::from)
    .to_vec();
    let server = text_editor::start(sandbox.clone(), &config).await.unwrap();
    let out = server
        .call_tool(
            "text_editor",
            args(json!({"command": "view", "path": "/workspace/project/long.txt"})),
        )
        .await
        .unwrap();
    assert!(out.text.contains("the output limit is 300 bytes"), "{out:?}");

    // A command that is no MCP server fails at start with a clear error.
    config.command = vec!["/bin/false".into()];
    let err = text_editor::start(sandbox.clone(), &config)
        .await
        .err()
        .expect("must fail");
    assert!(matches!(err, McpError::Start { .. }), "{err}");
    assert!(
        err.to_string().contains("text_editor_mcp.mcp_server.command"),
        "{err}"
    );
    sandbox.remove().await.unwrap();
}

#[tokio::test]
async fn without_an_editor_binary_the_error_says_how_to_get_one() {
    common::ensure_images().await;
    let (backend, _) = common::backend().await;
    let sandbox: Arc<dyn Sandbox> = Arc::from(
        backend
            .prepare(&common::spec(&common::base_image()), None)
            .await
            .unwrap(),
    );
    let err = text_editor::start(sandbox.clone(), &editor_config())
        .await
        .err()
        .expect("must fail");
    assert!(err.to_string().contains("scripts/build-editor"), "{err}");
    sandbox.remove().await.unwrap();
}
