//! The `forgehand` binary as an operator runs it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support as common;

use forgehand::sandbox::{labels, SandboxBackend};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_forgehand");
const FAKE_TOKEN: &str = "ghp_doctorMustNeverPrintThis0123456789";

fn write_config(dir: &Path, instance: &str) -> std::path::PathBuf {
    let path = dir.join("config.yaml");
    let yaml = format!(
        "daemon:\n  instance_id: {instance}\n  state_dir: {}\nimages:\n  dir: {}\ngithub:\n  api_url: \"http://127.0.0.1:9\"\n  repositories: [\"acme/quiet\"]\n",
        dir.join("state").display(),
        common::repo_root().join("images").display()
    );
    std::fs::write(&path, yaml).unwrap();
    path
}

fn forgehand(config: &Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.arg("--config").arg(config);
    for (var, _) in forgehand::config::Secrets::default()
        .presence()
        .iter()
        .map(|(v, p, _)| (v, p))
    {
        cmd.env_remove(var);
    }
    cmd.env_remove("TEXT_EDITOR_MCP_ENABLED").env_remove("RUST_LOG");
    // A token for the watched repository; its API address answers nothing.
    cmd.env("GITHUB_TOKEN", "ghp_cli_test_token");
    cmd
}

#[tokio::test]
async fn doctor_prints_a_table_and_never_a_secret() {
    common::ensure_images().await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &common::unique("test-doctor"));
    let out = forgehand(&config)
        .arg("doctor")
        .env("GITHUB_TOKEN", FAKE_TOKEN)
        .env("OPENAI_API_KEY", "sk-alsoSecret42")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "doctor failed:\n{stdout}\n{stderr}");
    for row in [
        "docker",
        "image python",
        "image java",
        "GITHUB_TOKEN",
        "OPENAI_API_KEY",
        "text editor",
    ] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("no {row} row:\n{stdout}"));
        assert!(line.contains("PASS"), "{line}");
    }
    // Each configured model, with what the catalogue says of it and where from.
    let model = stdout
        .lines()
        .find(|l| l.starts_with("model gpt-5.6 "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        model.contains("PASS")
            && model.contains("via responses")
            && model.contains("reasons (effort: none/low/medium/high/xhigh)")
            && model.contains("from catalogue (litellm"),
        "{model}"
    );
    assert!(
        stdout.lines().any(|l| l.starts_with("model gpt-5.6-luna ")),
        "{stdout}"
    );
    // The others are listed with what is missing to use them.
    let claude = stdout
        .lines()
        .find(|l| l.starts_with("model claude-opus-5-5 "))
        .unwrap();
    assert!(
        claude.contains("WARN")
            && claude.contains("ANTHROPIC_API_KEY is not set")
            && claude.contains("adaptive"),
        "{claude}"
    );
    let gitlab = stdout.lines().find(|l| l.starts_with("GITLAB_TOKEN")).unwrap();
    assert!(gitlab.contains("WARN") && gitlab.contains("not set"), "{gitlab}");
    for secret in [FAKE_TOKEN, "sk-alsoSecret42", "doctorMustNever", "alsoSecret"] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "a secret leaked"
        );
    }
}

#[test]
fn doctor_fails_without_any_forge_token_or_model_key() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &common::unique("test-doctor"));
    let out = forgehand(&config)
        .env_remove("GITHUB_TOKEN")
        .arg("doctor")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success());
    let forge = stdout.lines().find(|l| l.starts_with("forge token")).unwrap();
    assert!(
        forge.contains("FAIL")
            && forge.contains("GitHub repositories are watched but GITHUB_TOKEN is not set"),
        "{stdout}"
    );
    assert!(stdout.contains("model key"), "{stdout}");
    // Below the table, the same advice `forgehand run` gives, with an example.
    assert!(stdout.contains("forgehand cannot start yet:"), "{stdout}");
    assert!(stdout.contains("export GITHUB_TOKEN=ghp_..."), "{stdout}");
    assert!(stdout.contains("export OPENAI_API_KEY=sk-..."), "{stdout}");
}

#[test]
fn a_bad_config_stops_the_binary_with_the_key_named() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, "sandbox:\n  memory: \"4 gigs\"\n").unwrap();
    let out = forgehand(&config).arg("run").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(r#"sandbox.memory: "4 gigs" is not a size; use e.g. "4g""#),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "errors go to stderr only");
}

#[test]
fn run_stops_at_start_when_the_editor_executable_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &common::unique("test-noeditor"));
    let out = forgehand(&config)
        .arg("run")
        .env("FORGEHAND_EDITOR_BINARY", "/nonexistent/forgehand-editor")
        .env("OPENAI_API_KEY", "sk-cli-test")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("/nonexistent/forgehand-editor") && stderr.contains("scripts/build-editor"),
        "{stderr}"
    );
}

#[test]
fn run_on_a_fresh_machine_says_what_to_set_with_an_example() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!("daemon:\n  state_dir: {}\n", dir.path().join("state").display()),
    )
    .unwrap();
    // Nothing watched, no model key.
    let out = forgehand(&config).arg("run").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for expected in [
        "forgehand cannot start yet",
        "github.repositories",
        "gitlab.projects",
        "OPENAI_API_KEY",
        "GEMINI_API_KEY",
        "repositories: [\"your-org/your-repo\"]",
        "export GITHUB_TOKEN=",
        "forgehand doctor",
    ] {
        assert!(stderr.contains(expected), "{expected} in {stderr}");
    }
    // A watched repository without its token.
    let watched = write_config(dir.path(), &common::unique("test-fresh"));
    let out = forgehand(&watched)
        .env_remove("GITHUB_TOKEN")
        .env("OPENAI_API_KEY", "sk-cli-test")
        .arg("run")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("GITHUB_TOKEN is not set") && !stderr.contains("nothing to watch"),
        "{stderr}"
    );
    assert!(!stderr.contains("sk-cli-test"));
}

/// `write_config`'s config with `http` (indented under `daemon:`).
fn with_http(config: &Path, http: &str) {
    let yaml = std::fs::read_to_string(config).unwrap();
    std::fs::write(config, yaml.replacen("images:\n", &format!("{http}images:\n"), 1)).unwrap();
}

#[test]
fn run_refuses_a_listener_others_reach_without_the_http_token() {
    let dir = tempfile::tempdir().unwrap();
    let port = common::mcp_client::free_address()
        .rsplit_once(':')
        .unwrap()
        .1
        .to_owned();
    let public = "https://forgehand.example.org";
    for (http, which) in [
        (
            format!("  http:\n    listen: \"0.0.0.0:{port}\"\n"),
            format!("daemon.http.listen is \"0.0.0.0:{port}\""),
        ),
        (
            format!("  http:\n    listen: \"127.0.0.1:{port}\"\n    public_url: \"{public}\"\n"),
            format!("daemon.http.public_url is \"{public}\""),
        ),
    ] {
        let config = write_config(dir.path(), &common::unique("test-exposed"));
        with_http(&config, &http);
        let out = forgehand(&config)
            .env("OPENAI_API_KEY", "sk-cli-test")
            .arg("run")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        for expected in [
            which.as_str(),
            "FORGEHAND_HTTP_TOKEN is not set",
            "every run's transcript",
            "keep daemon.http.listen on a loopback address",
            "daemon.http.public_url empty",
        ] {
            assert!(stderr.contains(expected), "{expected} in {stderr}");
        }
        // It stopped before listening.
        assert!(std::net::TcpStream::connect(format!("127.0.0.1:{port}")).is_err());
        // `doctor` fails on the same row.
        let out = forgehand(&config)
            .env("OPENAI_API_KEY", "sk-cli-test")
            .arg("doctor")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "{stdout}");
        let row = stdout
            .lines()
            .find(|l| l.starts_with("http listener"))
            .unwrap_or_else(|| panic!("no http listener row:\n{stdout}"));
        assert!(row.contains("FAIL") && row.contains(&which), "{row}");
        // With the token the listener is allowed.
        let out = forgehand(&config)
            .env("OPENAI_API_KEY", "sk-cli-test")
            .env("FORGEHAND_HTTP_TOKEN", "a-long-random-status-token")
            .arg("doctor")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!stdout.contains("http listener"), "{stdout}");
        assert!(!stdout.contains("a-long-random-status-token"), "{stdout}");
    }
}

#[test]
fn once_rejects_an_address_that_is_not_an_issue() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "once");
    let out = forgehand(&config)
        .args(["once", "https://github.com/acme/api"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is not an issue or PR/MR address"), "{stderr}");
}

#[test]
fn json_logs_are_one_object_per_line_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, "daemon: {bogus: 1}\n").unwrap();
    let out = forgehand(&config)
        .args(["--log-format", "json", "doctor"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr.lines().last().expect("a log line");
    assert!(line.starts_with('{') && line.ends_with('}'), "{line}");
    assert!(
        line.contains("\"level\":\"ERROR\"") && line.contains("daemon.bogus"),
        "{line}"
    );
}

#[test]
fn images_list_names_every_image_and_its_tag() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "list");
    let out = forgehand(&config).args(["images", "list"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for name in ["base", "python", "node", "go", "rust", "java"] {
        assert!(
            stdout.contains(&format!("{name}\tforgehand/{name}:latest")),
            "{stdout}"
        );
    }
}

#[test]
fn snapshots_are_listed_and_removed_only_when_named() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "snapshots");
    let key = "a1".repeat(32);
    let folder = dir.path().join("state/snapshots").join(&key);
    std::fs::create_dir_all(&folder).unwrap();
    for part in ["home.tar", "project.tar"] {
        std::fs::write(folder.join(part), vec![0u8; 1024]).unwrap();
    }
    let info = serde_json::json!({
        "key": key, "repository": "acme/quiet", "image": "forgehand/python:latest",
        "image_id": "sha256:1", "inputs": ["requirements.txt"], "setup_commands": ["make deps"],
        "setup_seconds": 3.0, "created_at": 1, "last_used_at": 1, "bytes": 2048
    });
    std::fs::write(folder.join("snapshot.json"), info.to_string()).unwrap();

    let listed = forgehand(&config).args(["images", "list"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&listed.stdout);
    assert!(stdout.contains("snapshot\ta1a1a1a1a1a1  acme/quiet"), "{stdout}");
    // Nothing named: an error that says how to name them, and nothing gone.
    let refused = forgehand(&config).args(["snapshots", "remove"]).output().unwrap();
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("--repository OWNER/NAME, or --all"), "{stderr}");
    assert!(folder.is_dir());
    let other = forgehand(&config)
        .args(["snapshots", "remove", "--repository", "acme/other"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&other.stdout).contains("no snapshot matched"));
    assert!(folder.is_dir());
    let removed = forgehand(&config)
        .args(["snapshots", "remove", "a1a1a1"])
        .output()
        .unwrap();
    assert!(removed.status.success());
    assert!(String::from_utf8_lossy(&removed.stdout).contains("removed a1a1a1a1a1a1"));
    assert!(!folder.exists());
}

#[tokio::test]
async fn run_reaps_orphans_at_start_and_stops_on_sigterm() {
    common::ensure_images().await;
    let instance = common::unique("test-run");
    let (backend, _) = common::backend().await;
    let backend = forgehand::sandbox::docker::DockerBackend::new(
        backend.docker().clone(),
        common::shipped_config().sandbox,
        instance.clone(),
    );
    let orphan = backend
        .prepare(&common::spec(&common::base_image()), None)
        .await
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &instance);
    let mut child = forgehand(&config)
        .arg("run")
        .env("OPENAI_API_KEY", "sk-cli-test")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let started = Instant::now();
    let mut log = Vec::new();
    while !log.iter().any(|l: &String| l.contains("forgehand started")) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "daemon did not start: {log:?}"
        );
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            log.push(line);
        }
    }
    assert!(
        log.iter().any(|l| l.contains("reaping orphaned sandbox")),
        "{log:?}"
    );
    assert!(
        common::containers_with_label(backend.docker(), labels::INSTANCE, &instance)
            .await
            .is_empty()
    );
    drop(orphan);

    let status = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    assert!(exit.success(), "{exit:?}");
}
