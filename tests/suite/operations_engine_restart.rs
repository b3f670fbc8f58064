//! The Docker engine stopped for 10 s while a task works in its sandbox:
//! the task is put off, tried again with growing waits, and resumes on a new
//! sandbox when the engine is back, from the run's last checkpoint; the
//! stopped one is reaped, so no container is left, and there is one
//! comment, one commit, one PR.
//!
//! The test starts an engine of its own (its own data and exec roots,
//! socket and containerd, `--bridge=none`), so restarting it disturbs
//! nothing else on the machine.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::daemon_rig;
use forgehand_test_support::fake_github;
use forgehand_test_support::git_http;
use forgehand_test_support::github_world;
use forgehand_test_support::scripted_model;

use daemon_rig::wait_until;
use fake_github::BOT;
use github_world::{World, DONE, REPO};
use scripted_model::edit_and_commit;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A Docker engine this test starts, stops and starts again.
struct OwnEngine {
    root: PathBuf,
    child: Option<Child>,
}

impl OwnEngine {
    fn start(root: &Path) -> OwnEngine {
        let mut engine = OwnEngine {
            root: root.to_owned(),
            child: None,
        };
        engine.up();
        engine
    }

    fn socket(&self) -> String {
        format!("unix://{}", self.root.join("docker.sock").display())
    }

    fn up(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.root.join("dockerd.log"))
            .unwrap();
        let child = Command::new("dockerd")
            .arg("--data-root")
            .arg(self.root.join("data"))
            .arg("--exec-root")
            .arg(self.root.join("exec"))
            .arg("--pidfile")
            .arg(self.root.join("docker.pid"))
            .args(["-H", &self.socket()])
            .args(["--bridge=none", "--iptables=false", "--ip6tables=false"])
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("dockerd (scripts/dev-env.sh installs Debian's docker.io)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.docker(&["info"]).status.success() {
            assert!(
                Instant::now() < deadline,
                "the test's own engine did not answer within 60 s"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// SIGTERM to the engine this test started, and wait for it to exit.
    fn down(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(60);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn docker(&self, args: &[&str]) -> std::process::Output {
        Command::new("docker")
            .args(["-H", &self.socket()])
            .args(args)
            .output()
            .unwrap()
    }

    /// Loads `image` from the machine's engine.
    fn load(&self, image: &str) {
        let mut save = Command::new("docker")
            .args(["save", image])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let load = Command::new("docker")
            .args(["-H", &self.socket(), "load", "-q"])
            .stdin(save.stdout.take().unwrap())
            .output()
            .unwrap();
        assert!(save.wait().unwrap().success(), "docker save {image} failed");
        assert!(load.status.success(), "{}", String::from_utf8_lossy(&load.stderr));
    }

    fn containers_of(&self, instance: &str) -> Vec<String> {
        let out = self.docker(&[
            "ps",
            "-aq",
            "--filter",
            &format!("label=io.forgehand.instance={instance}"),
        ]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for OwnEngine {
    fn drop(&mut self) {
        if self.child.is_some() {
            let ids = self.docker(&["ps", "-aq"]);
            for id in String::from_utf8_lossy(&ids.stdout).lines() {
                let _ = self.docker(&["rm", "-fv", id]);
            }
        }
        self.down();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_restart_mid_task_ends_cleanly_and_leaves_no_container() {
    // The model "thinks" 4 s before committing; the engine is away then,
    // for 10 s, and comes back with the sandbox stopped.
    let world = World::new(edit_and_commit(Duration::from_secs(4))).await;
    let engine_dir = tempfile::Builder::new()
        .prefix("fh-engine-")
        .tempdir_in("/tmp")
        .unwrap();
    let mut engine = OwnEngine::start(engine_dir.path());
    engine.load("forgehand/base:latest");
    let mut config = std::fs::read_to_string(&world.config).unwrap();
    config.push_str(&format!("docker:\n  host: \"{}\"\n", engine.socket()));
    std::fs::write(&world.config, config).unwrap();
    let log = world.log_path();

    let issue = world
        .github
        .open_issue(REPO, "maya", "Greet the world", "Say hello to the world.");
    world.github.add_label(REPO, issue, "coding agent", "maya");
    let mut daemon = world.start();
    // The second model request is the one answered after 4 s.
    wait_until(
        "the model at work in the sandbox",
        Duration::from_secs(120),
        async || world.model.requests().await.len() >= 2,
        &log,
    )
    .await;
    assert_eq!(engine.containers_of(&world.instance).len(), 1);
    engine.down();
    tokio::time::sleep(Duration::from_secs(10)).await;
    engine.up();

    let ended = async || {
        let labels = world.github.issue(REPO, issue).labels;
        labels == vec![DONE.to_owned()] || labels == vec!["coding agent failed".to_owned()]
    };
    wait_until("the task to end", Duration::from_secs(240), ended, &log).await;
    // Put off while the engine was away, then resumed on a new sandbox.
    let item = world.github.issue(REPO, issue);
    let text = daemon.log_text();
    assert_eq!(item.labels, vec![DONE.to_owned()], "{:?}", item.comments);
    let bot: Vec<_> = item.comments.iter().filter(|c| c.1 == BOT).collect();
    assert_eq!(bot.len(), 1, "one progress comment: {bot:?}");
    assert_eq!(world.github.pulls(REPO).len(), 1, "one pull request");
    assert!(
        text.contains("deferred, will be tried again"),
        "the task was put off"
    );
    assert!(text.contains("trying the deferred task again"));
    // The new sandbox got the files of the run's last checkpoint (the
    // edit of its first step) and the model went on from there.
    assert!(
        text.contains("resuming the model's run from its checkpoint"),
        "the run resumed from its checkpoint"
    );
    assert!(
        world
            .progress_comment(issue)
            .contains("Resumed the model's run after step 1"),
        "{}",
        world.progress_comment(issue)
    );
    assert_eq!(
        git_http::log(&world.bare, "forgehand/issue-1").len(),
        2,
        "one commit pushed"
    );
    wait_until(
        "no container of the daemon on the engine",
        Duration::from_secs(60),
        async || engine.containers_of(&world.instance).is_empty(),
        &log,
    )
    .await;
    assert!(daemon.terminate().success(), "the daemon went on");
}
