//! Runs the real `forgehand` executable as a daemon for end-to-end tests:
//! its stderr goes to a log file the test can read and scan, and it can be
//! stopped with SIGTERM or killed with SIGKILL.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// `forgehand` with `args`, only the given secrets in its environment,
/// and debug logs.
fn command(config: &Path, args: &[&str], env: &[(&str, String)]) -> Command {
    let mut cmd = Command::new(bin());
    cmd.arg("--config").arg(config).args(args);
    for (var, _, _) in forgehand::config::Secrets::default().presence() {
        cmd.env_remove(var);
    }
    for var in [
        "GITHUB_API_URL",
        "GITLAB_URL",
        "OPENAI_BASE_URL",
        "GEMINI_BASE_URL",
        "ANTHROPIC_BASE_URL",
    ] {
        cmd.env_remove(var);
    }
    // Debug logs of forgehand and the HTTP clients: the secret scans cover them too.
    cmd.env("RUST_LOG", "debug,hyper_util=info,h2=info,tower=info");
    // The static editor the images were built with.
    cmd.env("FORGEHAND_EDITOR_BINARY", crate::editor_binary().path());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// Runs `forgehand` with `args` to its end (without blocking the test's
/// runtime, whose fakes must answer it); stderr is appended to `log`. The
/// exit status and stdout.
pub async fn run_to_end(
    config: &Path,
    args: &[&str],
    env: &[(&str, String)],
    log: &Path,
) -> (ExitStatus, String) {
    run_to_end_in(None, config, args, env, log).await
}

/// `run_to_end` started in the folder `cwd` (when given), as an operator
/// who typed the command there: a relative `config` is taken from it.
pub async fn run_to_end_in(
    cwd: Option<&Path>,
    config: &Path,
    args: &[&str],
    env: &[(&str, String)],
    log: &Path,
) -> (ExitStatus, String) {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    let mut cmd = command(config, args, env);
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    let mut cmd = tokio::process::Command::from(cmd);
    // Not `output()`, which would pipe stderr too.
    let out = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::from(file))
        .kill_on_drop(true)
        .spawn()
        .unwrap()
        .wait_with_output()
        .await
        .unwrap();
    (out.status, String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The `forgehand` binary the tests run.
pub fn bin() -> std::path::PathBuf {
    crate::workspace_binary("forgehand")
}

pub struct DaemonProcess {
    child: Option<Child>,
    pub log: PathBuf,
}

impl DaemonProcess {
    /// Starts `forgehand run` (or other arguments) with only the given
    /// secrets in its environment; stderr is appended to `log`.
    pub fn start(config: &Path, args: &[&str], env: &[(&str, String)], log: &Path) -> DaemonProcess {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let child = command(config, args, env)
            .stdout(Stdio::null())
            .stderr(Stdio::from(file))
            .spawn()
            .unwrap();
        DaemonProcess {
            child: Some(child),
            log: log.to_owned(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn terminate(&mut self) -> ExitStatus {
        let mut child = self.child.take().unwrap();
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the daemon did not stop within 60 s of SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits for the process to end by itself.
    pub fn wait(&mut self, limit: Duration) -> ExitStatus {
        let mut child = self.child.take().unwrap();
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!(
                    "the process did not end within {} s:\n{}",
                    limit.as_secs(),
                    self.log_text()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for DaemonProcess {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Polls `condition` every 100 ms until it holds; panics naming `what` after `limit`.
pub async fn wait_until(what: &str, limit: Duration, mut condition: impl AsyncFnMut() -> bool, log: &Path) {
    let start = Instant::now();
    while !condition().await {
        if start.elapsed() > limit {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            // The records' first lines only: a debug record's body (a
            // request, a comment) can run over many lines.
            let tail: Vec<&str> = text
                .lines()
                .filter(|l| {
                    [" INFO ", " WARN ", " ERROR "]
                        .iter()
                        .any(|level| l.contains(level))
                })
                .rev()
                .take(60)
                .collect();
            panic!(
                "timed out after {} s waiting for: {what}\n--- daemon log (last lines) ---\n{}",
                limit.as_secs(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Config for an end-to-end daemon: fast polling, the scripted model, the
/// given forge section.
pub fn write_config(dir: &Path, instance: &str, forge_yaml: &str) -> PathBuf {
    write_config_with(dir, instance, "", forge_yaml)
}

/// The same, with more `daemon:` settings (indented lines). Planning is off
/// unless `forge_yaml` has a `planning:` section of its own.
pub fn write_config_with(dir: &Path, instance: &str, daemon_extra: &str, forge_yaml: &str) -> PathBuf {
    let path = dir.join("config.yaml");
    let planning = if forge_yaml.lines().any(|l| l.starts_with("planning:")) {
        ""
    } else {
        "planning:\n  mode: \"off\"\n"
    };
    // A test that names its own models brings its own llm section.
    let llm = if forge_yaml.lines().any(|l| l.starts_with("llm:")) {
        ""
    } else {
        "llm:\n  retry:\n    initial_backoff: \"100ms\"\n    max_backoff: \"200ms\"\n    max_retries: 1\n  models:\n    - provider: \"openai\"\n      model: \"gpt-4o-mini\"\n      max_input_tokens: 100000\n  prices:\n    \"gpt-4o-mini\": {input: 0.15, output: 0.6}\n"
    };
    // Every task starts from a one-commit-deep mirror and history, unless
    // the test says otherwise: delivery, rebases and follow-ups are
    // exercised from a shallow start.
    let git = if forge_yaml.lines().any(|l| l.starts_with("git:")) {
        ""
    } else {
        "git:\n  history_depth: 1\n"
    };
    // A test may set its own poll interval (webhooks, polling alone).
    let poll = if daemon_extra.contains("poll_interval:") {
        ""
    } else {
        "  poll_interval: \"1s\"\n"
    };
    let yaml = format!(
        r#"daemon:
  instance_id: "{instance}"
  state_dir: "{state}"
{poll}  poll_jitter: "0s"
  shutdown_grace: "2s"
{daemon_extra}
{git}{llm}{planning}{forge_yaml}
"#,
        state = dir.join("state").display(),
    );
    std::fs::write(&path, yaml).unwrap();
    path
}

/// Ids of the containers of `instance`.
pub fn containers_of(instance: &str) -> Vec<String> {
    let out = Command::new("docker")
        .args([
            "ps",
            "-aq",
            "--filter",
            &format!("label=io.forgehand.instance={instance}"),
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Removes the sandboxes of daemon `instance` (one a test killed: another
/// daemon never reaps a sandbox that is not its own).
pub fn remove_containers_of(instance: &str) {
    for id in containers_of(instance) {
        Command::new("docker").args(["rm", "-fv", &id]).output().unwrap();
    }
}

/// Fails if any of `secrets` is in the container's configuration, in any
/// file of its filesystem, or in the environment or arguments of any of
/// its processes (`/proc/*/environ`, `/proc/*/cmdline`); each also as git's
/// Basic credential in base64 (`x-access-token:` and `oauth2:`) and
/// percent-encoded. The needles reach grep on its standard input, never in
/// a process's arguments.
pub fn assert_container_clean(id: &str, secrets: &[&str]) {
    let inspect = Command::new("docker").args(["inspect", id]).output().unwrap();
    let inspect = String::from_utf8_lossy(&inspect.stdout);
    assert!(
        inspect.contains("\"Env\""),
        "docker inspect gave no config: {inspect}"
    );
    let needles: Vec<String> = secrets.iter().flat_map(|s| needles_of(s)).collect();
    for needle in &needles {
        assert!(
            !inspect.contains(needle.as_str()),
            "a secret is in the container's configuration"
        );
    }
    let patterns = needles.join("\n") + "\n";
    let files = [
        "-rlF",
        "--exclude-dir=proc",
        "--exclude-dir=sys",
        "--exclude-dir=dev",
        "-f",
        "-",
        "/",
    ];
    let (found, code, errors) = grep_in(id, &files, &patterns);
    assert!(
        found.trim().is_empty(),
        "a secret is in these container files: {found}"
    );
    // Exit 1: nothing found. Exit 2 is accepted only for the image's own
    // apt cache, which even root cannot read without capabilities.
    let only_apt_cache = errors.lines().all(|l| l.contains("/var/cache/apt/"));
    assert!(
        code == Some(1) || (code == Some(2) && only_apt_cache),
        "the scan did not complete: {code:?} {errors}"
    );
    let processes = [
        "-rlF",
        "--include=environ",
        "--include=cmdline",
        "-f",
        "-",
        "/proc",
    ];
    let (found, code, _) = grep_in(id, &processes, &patterns);
    // grep's own process reads its patterns from stdin: its arguments and
    // environment hold none of them. Processes that end while read give 2.
    assert!(found.trim().is_empty(), "a secret is in these processes: {found}");
    assert!(
        matches!(code, Some(1) | Some(2)),
        "the /proc scan did not run: {code:?}"
    );
}

/// `secret` as it may be written down: itself, git's Basic credential in
/// base64, percent-encoded.
fn needles_of(secret: &str) -> Vec<String> {
    use base64::Engine;
    let b64 = |user: &str| base64::engine::general_purpose::STANDARD.encode(format!("{user}:{secret}"));
    let encoded =
        percent_encoding::utf8_percent_encode(secret, percent_encoding::NON_ALPHANUMERIC).to_string();
    let mut needles = vec![secret.to_owned(), b64("x-access-token"), b64("oauth2")];
    if encoded != secret {
        needles.push(encoded);
    }
    needles
}

/// `grep ARGS` as root in the container, its patterns on stdin: (stdout,
/// exit code, stderr).
fn grep_in(id: &str, args: &[&str], patterns: &str) -> (String, Option<i32>, String) {
    use std::io::Write;
    let mut child = Command::new("docker")
        .args(["exec", "-i", "-u", "0", id, "grep"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(patterns.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
