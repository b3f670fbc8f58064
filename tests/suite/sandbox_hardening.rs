//! The hardening of a sandbox, checked from inside a real container.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support as common;

use forgehand::sandbox::Sandbox;
use std::time::Duration;

async fn run(sandbox: &dyn Sandbox, command: &str) -> forgehand::sandbox::ExecOutput {
    sandbox
        .exec(command, Some(Duration::from_secs(60)))
        .await
        .expect("exec runs")
}

#[tokio::test]
async fn the_only_network_interface_is_loopback() {
    let (backend, _) = common::backend().await;
    let sandbox = common::base_sandbox(&backend, None).await;
    let out = run(sandbox.as_ref(), "ls /sys/class/net").await;
    assert!(out.success(), "{out:?}");
    assert_eq!(
        out.stdout.split_whitespace().collect::<Vec<_>>(),
        vec!["lo"],
        "{out:?}"
    );
    sandbox.remove().await.unwrap();
}

#[tokio::test]
async fn no_capabilities_no_root_no_new_privileges() {
    let (backend, _) = common::backend().await;
    let sandbox = common::base_sandbox(&backend, None).await;
    let out = run(
        sandbox.as_ref(),
        "grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs)' /proc/self/status; id -u; id -g",
    )
    .await;
    assert!(out.success(), "{out:?}");
    let fields: Vec<(&str, &str)> = out
        .stdout
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k, v.trim()))
        .collect();
    assert!(fields.contains(&("CapEff", "0000000000000000")), "{out:?}");
    assert!(fields.contains(&("CapPrm", "0000000000000000")), "{out:?}");
    assert!(fields.contains(&("CapBnd", "0000000000000000")), "{out:?}");
    assert!(fields.contains(&("NoNewPrivs", "1")), "{out:?}");
    let ids: Vec<&str> = out.stdout.lines().rev().take(2).collect();
    assert_eq!(ids, vec!["1000", "1000"], "uid and gid: {out:?}");
    sandbox.remove().await.unwrap();
}

#[tokio::test]
async fn only_workspace_tmp_and_home_are_writable() {
    let (backend, _) = common::backend().await;
    let sandbox = common::base_sandbox(&backend, None).await;
    for dir in ["/workspace/project", "/tmp", "/home/agent"] {
        let out = run(
            sandbox.as_ref(),
            &format!("echo ok > {dir}/probe && cat {dir}/probe"),
        )
        .await;
        assert!(
            out.success() && out.stdout == "ok\n",
            "{dir} should be writable: {out:?}"
        );
    }
    for path in [
        "/probe",
        "/etc/probe",
        "/usr/local/bin/probe",
        "/var/probe",
        "/root/probe",
    ] {
        let out = run(sandbox.as_ref(), &format!("echo bad > {path}")).await;
        assert!(!out.success(), "{path} should not be writable: {out:?}");
        assert!(
            out.stderr.contains("Read-only file system") || out.stderr.contains("Permission denied"),
            "{path}: {out:?}"
        );
    }
    sandbox.remove().await.unwrap();
}

#[tokio::test]
async fn memory_and_cpu_limits_are_set_on_the_container() {
    let (backend, _) = common::backend().await;
    let sandbox = common::base_sandbox(&backend, None).await;
    let info = backend
        .docker()
        .inspect_container(sandbox.id(), None)
        .await
        .unwrap();
    let host = info.host_config.unwrap();
    let config = common::shipped_config().sandbox;
    assert_eq!(host.memory, Some(config.memory_bytes as i64));
    assert_eq!(host.nano_cpus, Some((config.cpus * 1e9) as i64));
    assert_eq!(host.pids_limit, Some(config.pids_limit));
    assert_eq!(host.readonly_rootfs, Some(true));
    assert_eq!(host.network_mode.as_deref(), Some("none"));
    // The cgroup the kernel enforces says the same.
    let out = run(
        sandbox.as_ref(),
        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max",
    )
    .await;
    assert_eq!(out.stdout.trim(), config.memory_bytes.to_string(), "{out:?}");
    sandbox.remove().await.unwrap();
}

#[tokio::test]
async fn a_fork_loop_hits_the_pids_limit_and_everything_survives() {
    let mut config = common::shipped_config().sandbox;
    config.pids_limit = 64;
    let (backend, _) = common::backend_with(config).await;
    let sandbox = common::base_sandbox(&backend, None).await;
    // A bounded fork loop: far more short sleeps than the limit allows.
    let out = sandbox
        .exec(
            "i=0; while [ $i -lt 400 ]; do sleep 3 & i=$((i+1)); done; wait",
            Some(Duration::from_secs(60)),
        )
        .await
        .expect("the exec itself is reported, not an error");
    let text = format!("{}{}", out.stdout, out.stderr).to_lowercase();
    assert!(
        !out.success() || text.contains("fork") || text.contains("resource temporarily unavailable"),
        "the loop should have run into the pids limit: {out:?}"
    );
    // Once the sleeps end, the sandbox works again.
    let mut recovered = false;
    for _ in 0..30 {
        if let Ok(out) = sandbox.exec("echo alive", Some(Duration::from_secs(10))).await {
            if out.stdout == "alive\n" {
                recovered = true;
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(recovered, "the sandbox should recover after the fork loop");
    let info = backend
        .docker()
        .inspect_container(sandbox.id(), None)
        .await
        .unwrap();
    assert_eq!(info.state.unwrap().running, Some(true));
    sandbox.remove().await.unwrap();
}
