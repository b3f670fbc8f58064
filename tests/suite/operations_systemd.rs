//! systemd: the unit passes `systemd-analyze verify`, and the daemon speaks
//! the notify protocol to a real datagram socket the way systemd hands it
//! one (`NOTIFY_SOCKET`, `WATCHDOG_USEC`): READY=1 after the first poll,
//! WATCHDOG=1 from the poll loop, STATUS= lines, STOPPING=1 on SIGTERM.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support as common;
use forgehand_test_support::daemon_rig;
use forgehand_test_support::github_world;
use forgehand_test_support::scripted_model;

use github_world::World;
use scripted_model::text;
use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

#[test]
fn the_unit_passes_systemd_analyze_verify() {
    let dir = tempfile::tempdir().unwrap();
    let unit = std::fs::read_to_string(common::repo_root().join("deploy/systemd/forgehand.service")).unwrap();
    assert!(unit.contains("Type=notify") && unit.contains("WatchdogSec="));
    // verify wants the executable to exist: point it at the one just built.
    let unit = unit.replace("/usr/local/bin/forgehand", env!("CARGO_BIN_EXE_forgehand"));
    let path = dir.path().join("forgehand.service");
    std::fs::write(&path, unit).unwrap();
    let out = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .expect("systemd-analyze (Debian's systemd; scripts/dev-env.sh installs it)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.trim().is_empty(), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_notifies_ready_feeds_the_watchdog_and_says_what_it_does() {
    let world = World::new(vec![(text("nothing to do"), None)]).await;
    let socket_path = world.dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    socket.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let mut env: Vec<(&str, String)> = world.env().into_iter().collect();
    env.push(("NOTIFY_SOCKET", socket_path.display().to_string()));
    env.push(("WATCHDOG_USEC", "1500000".into()));
    let mut daemon = daemon_rig::DaemonProcess::start(&world.config, &["run"], &env, &world.log_path());
    let mut messages: Vec<String> = Vec::new();
    let mut buf = [0u8; 4096];
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(30) {
        if let Ok(n) = socket.recv(&mut buf) {
            messages.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
        // Fed after ready (a slow first poll may feed it before, too).
        let fed_after_ready = messages
            .iter()
            .skip_while(|m| !m.contains("READY=1"))
            .filter(|m| m.contains("WATCHDOG=1"))
            .count();
        if fed_after_ready >= 4 {
            break;
        }
    }
    let all = messages.join("|");
    assert!(all.contains("READY=1"), "{all}\n{}", daemon.log_text());
    let ready_at = messages.iter().position(|m| m.contains("READY=1")).unwrap();
    assert!(
        messages[ready_at + 1..]
            .iter()
            .filter(|m| m.contains("WATCHDOG=1"))
            .count()
            >= 3,
        "the watchdog is fed after ready: {all}"
    );
    assert!(all.contains("STATUS=0 tasks running, next poll in"), "{all}");
    assert!(daemon.terminate().success());
    let mut stopping = false;
    while let Ok(n) = socket.recv(&mut buf) {
        stopping |= String::from_utf8_lossy(&buf[..n]).contains("STOPPING=1");
    }
    assert!(stopping, "STOPPING=1 on SIGTERM");
}
