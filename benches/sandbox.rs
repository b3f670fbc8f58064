//! Sandbox benchmarks on the real Docker engine:
//! - ready time: create + start + copy in a 10 MB workspace (image present);
//! - exec round trip of `true` through the command executor;
//! - round trip of one line over a long-lived exec stream;
//! - the same `true` over the supervisor's multiplexed stream, and 50 MB of
//!   command output through a `docker exec` and through the supervisor.
//!
//! Run: `cargo bench --bench sandbox` (needs the engine and images that
//! `scripts/test` or `scripts/dev-env.sh` + `forgehand images build base` prepare).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use forgehand::config::Config;
use forgehand::images;
use forgehand::sandbox::docker::{connect, DockerBackend};
use forgehand::sandbox::helper::EditorBinary;
use forgehand::sandbox::{SandboxBackend, SandboxSpec};
#[path = "support/stats.rs"]
mod stats;

use stats::report;
use std::path::Path;
use std::time::Instant;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// A 10 MB workspace shaped like a repository: 40 folders of 5 files each.
fn make_workspace(root: &Path) {
    let line = b"fn main() { println!(\"x\"); }\n";
    let content: Vec<u8> = (0..50 * 1024).map(|i| line[i % line.len()]).collect();
    for folder in 0..40 {
        let dir = root.join(format!("src/module_{folder}"));
        std::fs::create_dir_all(&dir).unwrap();
        for file in 0..5 {
            std::fs::write(dir.join(format!("file_{file}.rs")), &content).unwrap();
        }
    }
}

#[tokio::main]
async fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = Config::load(&root.join("config.yaml")).expect("config.yaml loads");
    let docker = connect(&config.docker)
        .await
        .expect("Docker is reachable (run scripts/dev-env.sh)");
    let image = images::image_tag(&config.images, "base");
    assert!(
        images::image_present(&docker, &image).await.unwrap(),
        "{image} is missing; run `cargo run -- images build base`"
    );
    let backend = DockerBackend::new(
        docker,
        config.sandbox.clone(),
        format!("bench-{}", std::process::id()),
    );
    let workspace = tempfile::tempdir().unwrap();
    make_workspace(workspace.path());
    let spec = |i: usize| SandboxSpec {
        task_id: format!("bench-{i}"),
        forge: "local".into(),
        repository: "bench/workspace".into(),
        image: image.clone(),
        env: Vec::new(),
    };
    println!(
        "forgehand sandbox benchmarks ({} cores); reproduce with: cargo bench --bench sandbox",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)
    );

    // Warm-up: the first container pays for the engine's caches.
    backend
        .prepare(&spec(0), Some(workspace.path()))
        .await
        .unwrap()
        .remove()
        .await
        .unwrap();
    let mut ready = Vec::new();
    for i in 1..=20 {
        let started = Instant::now();
        let sandbox = backend.prepare(&spec(i), Some(workspace.path())).await.unwrap();
        ready.push(started.elapsed());
        sandbox.remove().await.unwrap();
    }
    report("sandbox ready (create+start+copy 10 MB)", &mut ready);

    let sandbox = backend.prepare(&spec(100), None).await.unwrap();
    let mut exec = Vec::new();
    for _ in 0..300 {
        let started = Instant::now();
        let out = sandbox.exec("true", None).await.unwrap();
        exec.push(started.elapsed());
        assert!(out.success());
    }
    report("exec round trip of `true`", &mut exec);

    let mut stream = sandbox.exec_stream(&["cat".to_owned()]).await.unwrap();
    let mut stdout = BufReader::new(stream.stdout);
    let mut line = String::new();
    let mut trips = Vec::new();
    let message = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
    for _ in 0..2000 {
        let started = Instant::now();
        stream.stdin.write_all(message).await.unwrap();
        stream.stdin.flush().await.unwrap();
        line.clear();
        stdout.read_line(&mut line).await.unwrap();
        trips.push(started.elapsed());
    }
    report("exec stream line round trip", &mut trips);
    let flood = "head -c 50000000 /dev/zero";
    let started = Instant::now();
    let out = sandbox.exec(flood, None).await.unwrap();
    let plain_flood = started.elapsed();
    assert!(out.success());
    sandbox.remove().await.unwrap();

    let editor = EditorBinary::locate(config.text_editor_mcp.editor_binary.as_deref())
        .expect("forgehand-editor is built (scripts/build-editor; FORGEHAND_EDITOR_BINARY)");
    let supervised = backend.clone().with_editor(editor);
    let sandbox = supervised.prepare(&spec(101), None).await.unwrap();
    assert!(sandbox.egress().is_some(), "the supervisor runs");
    let mut exec = Vec::new();
    for _ in 0..2000 {
        let started = Instant::now();
        let out = sandbox.exec("true", None).await.unwrap();
        exec.push(started.elapsed());
        assert!(out.success());
    }
    report("supervised round trip of `true`", &mut exec);
    let started = Instant::now();
    let out = sandbox.exec(flood, None).await.unwrap();
    let supervised_flood = started.elapsed();
    assert!(out.success());
    println!(
        "50 MB of output: docker exec {:.0} ms ({:.0} MB/s), supervisor {:.0} ms ({:.0} MB/s)",
        plain_flood.as_secs_f64() * 1e3,
        50.0 / plain_flood.as_secs_f64(),
        supervised_flood.as_secs_f64() * 1e3,
        50.0 / supervised_flood.as_secs_f64()
    );
    sandbox.remove().await.unwrap();
}
