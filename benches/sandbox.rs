//! Sandbox benchmarks on the real Docker engine:
//! - ready time: create + start + copy in a 10 MB workspace (image present);
//! - exec round trip of `true` through the command executor;
//! - round trip of one line over a long-lived exec stream;
//! - the same `true` over the supervisor's multiplexed stream, and 50 MB of
//!   command output through a `docker exec` and through the supervisor;
//! - 50 MB downloaded through the egress tunnel against directly;
//! - a setup snapshot (35 MB) saved and restored into a fresh sandbox.
//!
//! Run: `cargo bench --bench sandbox` (needs the engine and images that
//! `scripts/test` or `scripts/dev-env.sh` + `forgehand images build base` prepare).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use forgehand::config::Config;
use forgehand::images;
use forgehand::sandbox::docker::{connect, DockerBackend};
use forgehand::sandbox::helper::EditorBinary;
use forgehand::sandbox::{SandboxBackend, SandboxSpec};
use forgehand_test_support::sample_workspace as workspace;
use forgehand_test_support::stats;

use stats::report;
use std::path::Path;
use std::time::Instant;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use workspace::make_workspace;

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
    // The tunnel's target is a server on the host's loopback.
    let mut supervised_config = config.sandbox.clone();
    supervised_config.egress_allow_loopback = true;
    let supervised = DockerBackend::new(
        connect(&config.docker).await.unwrap(),
        supervised_config.clone(),
        format!("bench-{}", std::process::id()),
    )
    .with_editor(editor.clone());
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
    tunnel_throughput(sandbox.as_ref(), config.sandbox.egress_proxy_port, "socket").await;
    phase_end(sandbox.as_ref()).await;
    {
        // The same download over the exec stream, as on an engine elsewhere.
        let mut over_exec = supervised_config.clone();
        over_exec.egress_transport = forgehand::config::EgressTransport::Exec;
        let backend = DockerBackend::new(
            connect(&config.docker).await.unwrap(),
            over_exec,
            format!("bench-{}", std::process::id()),
        )
        .with_editor(editor.clone());
        let sandbox = backend.prepare(&spec(103), None).await.unwrap();
        tunnel_throughput(sandbox.as_ref(), config.sandbox.egress_proxy_port, "exec stream").await;
        sandbox.remove().await.unwrap();
    }
    snapshot_save_and_restore(&supervised, sandbox.as_ref(), &spec(102), &config).await;
    sandbox.remove().await.unwrap();
}

/// A host on the "internet" (the host's loopback) that sends 50 MB to each
/// connection; returns its port.
async fn fifty_megabyte_server() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let chunk = vec![b'x'; 62_500];
                for _ in 0..800 {
                    if socket.write_all(&chunk).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// 50 MB through the egress tunnel (bash's /dev/tcp and `cat` inside the
/// sandbox, a CONNECT to the proxy) against the same client on the host
/// reading the server directly.
async fn tunnel_throughput(sandbox: &dyn forgehand::sandbox::Sandbox, proxy_port: u16, way: &str) {
    use forgehand::config::HostPattern;
    let port = fifty_megabyte_server().await;
    sandbox.egress().unwrap().set_phase(
        "setup",
        vec![HostPattern::parse(&format!("127.0.0.1:{port}")).unwrap()],
    );
    // Each client times its own download (bash's clock, no fork), so the
    // cost of starting a process here or in the sandbox counts on neither side.
    let timed = |download: &str| {
        format!("bash -c 's=$EPOCHREALTIME; n=$({download} | wc -c); e=$EPOCHREALTIME; echo $n $s $e'")
    };
    let through = timed(&format!(
        "exec 3<>/dev/tcp/127.0.0.1/{proxy_port}; printf \"CONNECT 127.0.0.1:{port} HTTP/1.1\\r\\nHost: 127.0.0.1:{port}\\r\\n\\r\\n\" >&3; cat <&3"
    ));
    let plain = timed(&format!("cat < /dev/tcp/127.0.0.1/{port}"));
    let took = |out: &str| {
        let fields: Vec<&str> = out.split_whitespace().collect();
        assert_eq!(fields.len(), 3, "{out}");
        let bytes: u64 = fields[0].parse().unwrap();
        assert!(bytes >= 50_000_000, "{out}");
        let stamp = |s: &str| s.replace(',', ".").parse::<f64>().unwrap();
        std::time::Duration::from_secs_f64(stamp(fields[2]) - stamp(fields[1]))
    };
    let mut tunnel = Vec::new();
    let mut direct = Vec::new();
    for _ in 0..7 {
        let out = sandbox.exec(&through, None).await.unwrap();
        tunnel.push(took(&out.stdout));
        let out = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(&plain)
            .output()
            .await
            .unwrap();
        direct.push(took(&String::from_utf8_lossy(&out.stdout)));
    }
    tunnel.sort();
    direct.sort();
    let (t, d) = (tunnel[3].as_secs_f64(), direct[3].as_secs_f64());
    println!(
        "50 MB download (median of 7, timed by the client): tunnel over the {way} {:.0} ms ({:.0} MB/s), direct {:.0} ms ({:.0} MB/s): {:.0} % of direct",
        t * 1e3,
        50.0 / t,
        d * 1e3,
        50.0 / d,
        100.0 * d / t
    );
}

/// A setup's output (a virtual environment's worth: 300 files, 30 MB in
/// the project, 5 MB in the home folder) saved as a snapshot, then restored
/// into a fresh sandbox.
async fn snapshot_save_and_restore(
    backend: &DockerBackend,
    sandbox: &dyn forgehand::sandbox::Sandbox,
    fresh: &SandboxSpec,
    config: &Config,
) {
    use forgehand::snapshots::{SnapshotInfo, SnapshotStore};
    let out = sandbox
        .exec(
            "mkdir -p .venv/deps \"$HOME/.cache/pip\" && for i in $(seq 1 300); do head -c 100000 /dev/urandom > .venv/deps/f$i; done && head -c 5000000 /dev/urandom > \"$HOME/.cache/pip/wheel\"",
            None,
        )
        .await
        .unwrap();
    assert!(out.success(), "{out:?}");
    let dir = tempfile::tempdir().unwrap();
    let mut settings = config.sandbox.snapshots.clone();
    settings.dir = dir.path().to_owned();
    let store = SnapshotStore::new(&settings);
    let checkout = tempfile::tempdir().unwrap();
    let home = &config.sandbox.home_dir;
    let info = SnapshotInfo {
        key: "b".repeat(64),
        repository: "bench/workspace".into(),
        image: fresh.image.clone(),
        image_id: String::new(),
        inputs: vec![],
        setup_commands: vec![],
        setup_seconds: 0.0,
        created_at: 0,
        last_used_at: 0,
        bytes: 0,
    };
    let started = Instant::now();
    let info = store
        .save(sandbox, home, checkout.path(), info, &[])
        .await
        .unwrap();
    let saved = started.elapsed();
    let mut restores = Vec::new();
    for i in 0..5 {
        let target = backend
            .prepare(
                &SandboxSpec {
                    task_id: format!("{}-{i}", fresh.task_id),
                    ..fresh.clone()
                },
                None,
            )
            .await
            .unwrap();
        let started = Instant::now();
        store.restore(target.as_ref(), home, &info).await.unwrap();
        restores.push(started.elapsed());
        let check = target.exec("ls .venv/deps | wc -l", None).await.unwrap();
        assert_eq!(check.stdout.trim(), "300");
        target.remove().await.unwrap();
    }
    println!(
        "setup snapshot of {:.1} MB: saved in {:.0} ms",
        info.bytes as f64 / 1e6,
        saved.as_secs_f64() * 1e3
    );
    report("snapshot restore (35 MB, 301 files)", &mut restores);
}

/// What ending setup's processes adds to a task: marking the phase's start
/// and, at its end, finding and killing what it left (here: five escaped
/// processes each time), over the supervisor.
async fn phase_end(sandbox: &dyn forgehand::sandbox::Sandbox) {
    use forgehand::sandbox::phase_processes::{end_phase, phase_start};
    let mut marks = Vec::new();
    let mut ends = Vec::new();
    for _ in 0..20 {
        let started = Instant::now();
        let start = phase_start(sandbox).await.unwrap();
        marks.push(started.elapsed());
        let leave = "for i in 1 2 3 4 5; do setsid sleep 600 > /dev/null 2>&1 & done";
        assert!(sandbox.exec(leave, None).await.unwrap().success());
        let started = Instant::now();
        let ended = end_phase(sandbox, start).await.unwrap();
        ends.push(started.elapsed());
        assert_eq!(ended, 5);
    }
    report(
        "setup phase start mark (one exec, then a 20 ms tick wait)",
        &mut marks,
    );
    report("setup phase end (find and kill 5 escaped processes)", &mut ends);
}
