//! The command executor and the long-lived exec stream, on a real container.
//! Every command check runs both ways: a `docker exec` per command (an
//! image without forgehand's editor) and over the supervisor's session.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support as common;

use forgehand::sandbox::{Sandbox, SandboxBackend};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// A base-image sandbox without the supervisor and one with it.
async fn both_ways(config: forgehand::config::SandboxConfig) -> Vec<Box<dyn Sandbox>> {
    let (plain, _) = common::backend_with(config.clone()).await;
    let (supervised, _) = common::backend_with(config).await;
    let supervised = supervised.with_editor(common::editor_binary());
    let mut sandboxes = vec![common::base_sandbox(&plain, None).await];
    common::ensure_images().await;
    let with_editor = supervised
        .prepare(&common::spec(&common::base_image()), None)
        .await
        .unwrap();
    assert!(with_editor.egress().is_some(), "the supervisor runs");
    sandboxes.push(with_editor);
    sandboxes
}

#[tokio::test]
async fn exit_codes_stdout_and_stderr_come_back_apart() {
    for sandbox in both_ways(common::shipped_config().sandbox).await {
        exit_codes_come_back(sandbox).await;
    }
}

async fn exit_codes_come_back(sandbox: Box<dyn Sandbox>) {
    let out = sandbox
        .exec("echo out; echo err >&2; exit 3", None)
        .await
        .unwrap();
    assert_eq!(out.exit_code, Some(3));
    assert_eq!(out.stdout, "out\n");
    assert_eq!(out.stderr, "err\n");
    assert!(!out.timed_out && !out.success());
    let out = sandbox.exec("pwd", None).await.unwrap();
    assert_eq!(
        (out.exit_code, out.stdout.as_str()),
        (Some(0), "/workspace/project\n")
    );
    let out = sandbox.exec("no-such-command-here", None).await.unwrap();
    assert_eq!(out.exit_code, Some(127), "{out:?}");
    sandbox.remove().await.unwrap();
}

#[tokio::test]
async fn a_command_that_outlives_its_timeout_is_killed_with_its_children() {
    for sandbox in both_ways(common::shipped_config().sandbox).await {
        killed_with_children(sandbox).await;
    }
}

async fn killed_with_children(sandbox: Box<dyn Sandbox>) {
    let out = sandbox
        .exec(
            "echo started; sleep 300 & sleep 301; echo never",
            Some(Duration::from_secs(2)),
        )
        .await
        .unwrap();
    assert!(out.timed_out, "{out:?}");
    assert_eq!(out.exit_code, None);
    assert!(
        out.stdout.contains("started") && !out.stdout.contains("never"),
        "{out:?}"
    );
    assert!(out.stderr.contains("timeout"), "{out:?}");
    assert!(out.duration < Duration::from_secs(30), "{out:?}");
    // (PID 1's own `sleep infinity` is not one of them.)
    let left = sandbox
        .exec("pgrep -c -f 'sleep 30[01]' || true", None)
        .await
        .unwrap();
    assert_eq!(
        left.stdout.trim(),
        "0",
        "no sleep may survive its timeout: {left:?}"
    );
    sandbox.remove().await.unwrap();
}

#[tokio::test]
async fn output_above_the_cap_is_truncated_with_a_marker() {
    let mut config = common::shipped_config().sandbox;
    config.output_limit = 64 * 1024;
    for sandbox in both_ways(config).await {
        truncated_with_a_marker(sandbox).await;
    }
}

async fn truncated_with_a_marker(sandbox: Box<dyn Sandbox>) {
    let out = sandbox
        .exec(
            "head -c 3000000 /dev/zero | tr '\\0' a; echo; echo LAST-LINE",
            None,
        )
        .await
        .unwrap();
    assert!(out.success(), "{}", out.stderr);
    assert!(out.stdout_truncated && !out.stderr_truncated);
    assert!(out.stdout.contains("output truncated"), "marker missing");
    assert!(out.stdout.trim_end().ends_with("LAST-LINE"), "the tail is kept");
    assert!(
        out.stdout.len() < 64 * 1024 + 512,
        "kept {} bytes",
        out.stdout.len()
    );
    // Both streams at once, far beyond any flow-control window: nothing
    // stalls, and each keeps its own tail.
    let out = sandbox
        .exec(
            "(head -c 20000000 /dev/zero | tr '\\0' b; echo ERR-END) >&2 & \
             head -c 20000000 /dev/zero | tr '\\0' a; echo OUT-END; wait",
            Some(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    assert!(out.success() && !out.timed_out, "{:?}", out.exit_code);
    assert!(out.stdout_truncated && out.stderr_truncated);
    assert!(out.stdout.trim_end().ends_with("OUT-END"));
    assert!(out.stderr.trim_end().ends_with("ERR-END"));
    assert!(out.duration < Duration::from_secs(30), "{:?}", out.duration);
    sandbox.remove().await.unwrap();
}

#[tokio::test]
async fn non_utf8_output_is_decoded_lossily() {
    for sandbox in both_ways(common::shipped_config().sandbox).await {
        decoded_lossily(sandbox).await;
    }
}

async fn decoded_lossily(sandbox: Box<dyn Sandbox>) {
    let out = sandbox
        .exec("printf 'a\\377\\376b'; printf '\\300' >&2", None)
        .await
        .unwrap();
    assert!(out.success());
    assert_eq!(out.stdout, "a\u{fffd}\u{fffd}b");
    assert_eq!(out.stderr, "\u{fffd}");
    sandbox.remove().await.unwrap();
}

#[tokio::test]
async fn the_exec_stream_carries_bytes_both_ways_and_keeps_stderr_apart() {
    let (backend, _) = common::backend().await;
    let sandbox = common::base_sandbox(&backend, None).await;
    let argv: Vec<String> = ["sh", "-c", "echo ready >&2; exec cat"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut stream = sandbox.exec_stream(&argv).await.unwrap();
    let mut stdout = BufReader::new(stream.stdout);
    for i in 0..100 {
        let message = format!("{{\"jsonrpc\":\"2.0\",\"id\":{i}}}\n");
        stream.stdin.write_all(message.as_bytes()).await.unwrap();
        stream.stdin.flush().await.unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).await.unwrap();
        assert_eq!(line, message);
    }
    let mut err_line = String::new();
    BufReader::new(stream.stderr)
        .read_line(&mut err_line)
        .await
        .unwrap();
    assert_eq!(err_line, "ready\n");
    assert!(sandbox.exec_status(&stream.id).await.unwrap().running);
    stream.stdin.shutdown().await.unwrap();
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty());
    let status = common::exec_ended(sandbox.as_ref(), &stream.id).await;
    assert_eq!((status.running, status.exit_code), (false, Some(0)));
    sandbox.remove().await.unwrap();
}

#[tokio::test]
async fn put_file_writes_an_executable_the_sandbox_can_run() {
    let (backend, _) = common::backend().await;
    let sandbox = common::base_sandbox(&backend, None).await;
    sandbox
        .put_file(
            "/workspace/hello.sh",
            b"#!/bin/sh\necho hi from $(id -u)\n",
            0o755,
        )
        .await
        .unwrap();
    let out = sandbox.exec("/workspace/hello.sh", None).await.unwrap();
    assert_eq!(out.stdout, "hi from 1000\n", "{out:?}");
    for outside in [
        "/tmp/hello.sh",
        "/usr/local/bin/hello",
        "/workspace/../etc/x",
        "relative",
    ] {
        let err = sandbox
            .put_file(outside, b"x", 0o644)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains(outside) && err.contains("/workspace/"), "{err}");
    }
    sandbox.remove().await.unwrap();
}

#[tokio::test]
async fn a_phase_ends_every_process_it_started_even_those_that_left_its_group() {
    for sandbox in both_ways(common::shipped_config().sandbox).await {
        phase_processes_end(sandbox).await;
    }
}

/// Live processes of the sandbox, by their command line, with zombies left out.
async fn live_processes(sandbox: &dyn Sandbox) -> String {
    let listing = "for d in /proc/[0-9]*; do read -r s < $d/stat 2>/dev/null || continue; case \"${s##*) }\" in Z*) continue;; esac; tr '\\0' ' ' < $d/cmdline; echo; done";
    sandbox.exec(listing, None).await.unwrap().stdout
}

async fn phase_processes_end(sandbox: Box<dyn Sandbox>) {
    use forgehand::sandbox::phase_processes::{end_phase, phase_start};
    // Started before the phase: it stays.
    let before = sandbox
        .exec("nohup setsid sh -c 'exec sleep 1001' >/dev/null 2>&1 &", None)
        .await
        .unwrap();
    assert!(before.success(), "{before:?}");
    let start = phase_start(sandbox.as_ref()).await.unwrap();
    // During the phase: a new session, a double fork and a process that
    // ignores SIGTERM, each writing a heartbeat.
    let escape = "setsid sh -c 'while :; do echo a >> /tmp/beat-a; sleep 0.1; done' >/dev/null 2>&1 &
(sh -c 'trap \"\" TERM HUP; while :; do echo b >> /tmp/beat-b; sleep 0.1; done' >/dev/null 2>&1 &) &
nohup setsid sh -c 'exec sleep 1002' >/dev/null 2>&1 &";
    assert!(sandbox.exec(escape, None).await.unwrap().success());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let running = live_processes(sandbox.as_ref()).await;
    assert!(
        running.contains("sleep 1002") && running.contains("beat-b"),
        "{running}"
    );
    let ended = end_phase(sandbox.as_ref(), start).await.unwrap();
    assert!(ended >= 3, "{ended} ended\n{running}");
    let after = live_processes(sandbox.as_ref()).await;
    assert!(
        after.contains("sleep 1001"),
        "what ran before the phase stays:\n{after}"
    );
    for gone in ["sleep 1002", "beat-a", "beat-b"] {
        assert!(!after.contains(gone), "{gone} still runs:\n{after}");
    }
    let beats = "wc -l < /tmp/beat-a; wc -l < /tmp/beat-b";
    let first = sandbox.exec(beats, None).await.unwrap().stdout;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        sandbox.exec(beats, None).await.unwrap().stdout,
        first,
        "no heartbeat after the end"
    );
    // The sandbox still works, and a second end finds nothing.
    assert_eq!(end_phase(sandbox.as_ref(), start).await.unwrap(), 0);
    assert!(sandbox.exec("true", None).await.unwrap().success());
    sandbox.remove().await.unwrap();
}
