//! Text-editor benchmarks on the real Docker engine, over the in-container
//! exec stream and the rmcp client, as the agent loop uses them:
//! - `view` of a 2,000-line file, 1,000 calls;
//! - `str_replace`, 1,000 calls;
//! - cold start: exec start to a finished `initialize`, 30 times.
//!
//! Run: `cargo bench --bench editor` (after `scripts/test` or
//! `scripts/dev-env.sh`, `scripts/build-editor` and `forgehand images build base`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use forgehand::config::{Config, EDITOR_BINARY_ENV};
use forgehand::images;
use forgehand::mcp::{text_editor, McpClient};
use forgehand::sandbox::docker::{connect, DockerBackend};
use forgehand::sandbox::helper::EditorBinary;
use forgehand::sandbox::{Sandbox, SandboxBackend, SandboxSpec};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn report(name: &str, samples: &mut [Duration]) {
    samples.sort();
    let at = |p: f64| samples[((samples.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1000.0;
    println!(
        "{name:<44} n={:<5} median {:>7.3} ms   p90 {:>7.3} ms   p99 {:>7.3} ms",
        samples.len(),
        at(0.5),
        at(0.9),
        at(0.99)
    );
}

fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

#[tokio::main]
async fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = Config::load(&root.join("config.yaml")).unwrap();
    let editor_path = std::env::var_os(EDITOR_BINARY_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/x86_64-unknown-linux-gnu/release/forgehand-editor"));
    let editor = EditorBinary::load(&editor_path).expect("run scripts/build-editor first");
    let docker = connect(&config.docker).await.unwrap();
    let image = images::image_tag(&config.images, "base");
    let backend = DockerBackend::new(
        docker,
        config.sandbox.clone(),
        format!("bench-{}", std::process::id()),
    )
    .with_editor(editor);
    let workspace = tempfile::tempdir().unwrap();
    let lines: String = (1..=2000)
        .map(|i| format!("line {i}: let value_{i} = compute({i});\n"))
        .collect();
    std::fs::write(workspace.path().join("big.rs"), lines).unwrap();
    let spec = SandboxSpec {
        task_id: "bench-editor".into(),
        forge: "local".into(),
        repository: "bench/editor".into(),
        image,
        env: Vec::new(),
    };
    let sandbox: Arc<dyn Sandbox> = Arc::from(backend.prepare(&spec, Some(workspace.path())).await.unwrap());
    println!("forgehand editor benchmarks; reproduce with: cargo bench --bench editor");
    println!("editor in sandbox: {}", sandbox.editor_path().unwrap_or("?"));

    let mut exec_start = Vec::new();
    let argv = vec![
        sandbox.editor_path().unwrap_or_default().to_owned(),
        "--version".to_owned(),
    ];
    for _ in 0..30 {
        let started = Instant::now();
        let stream = sandbox.exec_stream(&argv).await.unwrap();
        exec_start.push(started.elapsed());
        drop(stream);
    }
    report("exec stream start alone (create + start)", &mut exec_start);

    let mut cold = Vec::new();
    for _ in 0..30 {
        let started = Instant::now();
        let server = text_editor::start(sandbox.clone(), &config.text_editor_mcp)
            .await
            .unwrap();
        cold.push(started.elapsed());
        server.shutdown().await;
    }
    report("cold start: exec start -> initialize done", &mut cold);

    let server = text_editor::start(sandbox.clone(), &config.text_editor_mcp)
        .await
        .unwrap();
    let path = "/workspace/project/big.rs";
    let mut views = Vec::new();
    for i in 0..1000 {
        let start_line = 1 + (i * 37) % 1900;
        let call =
            args(json!({"command": "view", "path": path, "view_range": [start_line, start_line + 99]}));
        let started = Instant::now();
        let out = server.call_tool("text_editor", call).await.unwrap();
        views.push(started.elapsed());
        assert!(!out.is_error, "{}", out.text);
    }
    report("view of a 2,000-line file (100 lines shown)", &mut views);

    let mut whole = Vec::new();
    for _ in 0..200 {
        let started = Instant::now();
        let out = server
            .call_tool("text_editor", args(json!({"command": "view", "path": path})))
            .await
            .unwrap();
        whole.push(started.elapsed());
        assert!(!out.is_error);
    }
    report("view of a 2,000-line file (whole, clipped)", &mut whole);

    let mut replaces = Vec::new();
    for i in 0..1000 {
        let line = 1 + i % 2000;
        let (old, new) = if (i / 2000) % 2 == 0 {
            (format!("line {line}: let"), format!("line {line}: const"))
        } else {
            (format!("line {line}: const"), format!("line {line}: let"))
        };
        let call = args(json!({"command": "str_replace", "path": path, "old_str": old, "new_str": new}));
        let started = Instant::now();
        let out = server.call_tool("text_editor", call).await.unwrap();
        replaces.push(started.elapsed());
        assert!(!out.is_error, "{}", out.text);
    }
    report("str_replace in a 2,000-line file", &mut replaces);
    server.shutdown().await;
    sandbox.remove().await.unwrap();
}
