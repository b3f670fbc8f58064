//! A GitHub world for end-to-end tests: a fake GitHub with one repository,
//! its real git remote behind token auth, the turn-scripted model, and a
//! daemon config pointing at them.
#![allow(dead_code)]

use super::daemon_rig::{self, DaemonProcess};
use super::fake_github::FakeGitHub;
use super::git_http::{self, GitHttpServer};
use super::scripted_model::{call, text, Reply, TurnModel};
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;

pub const TOKEN: &str = "ghp_e2eGitHubTokenThatMustNeverLeak01";
pub const MODEL_KEY: &str = "sk-e2eModelKeyThatMustNeverLeak0002";
pub const REPO: &str = "acme/app";
pub const DONE: &str = "coding agent done";

pub struct World {
    pub dir: tempfile::TempDir,
    pub git: GitHttpServer,
    pub bare: PathBuf,
    pub github: FakeGitHub,
    pub model: TurnModel,
    pub instance: String,
    pub config: PathBuf,
}

impl World {
    pub async fn new(turns: Vec<(Reply, Option<Duration>)>) -> World {
        World::with_daemon_settings(turns, "").await
    }

    /// `daemon_extra`: more `daemon:` settings, as indented YAML lines.
    pub async fn with_daemon_settings(turns: Vec<(Reply, Option<Duration>)>, daemon_extra: &str) -> World {
        crate::common::ensure_images().await;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("git");
        let bare = git_http::bare_repo(
            &root,
            "acme/app.git",
            &[("greet.py", "print('Hello')\n"), ("README.md", "# app\n")],
        );
        let git = GitHttpServer::start(&root, "x-access-token", TOKEN).await;
        let github = FakeGitHub::start(TOKEN).await;
        github.add_repo(REPO, &git.url("acme/app.git"), Some(bare.clone()));
        github.set_permission(REPO, "maya", "maintain");
        github.set_permission(REPO, "otto", "read");
        let model = TurnModel::start(turns).await;
        let instance = crate::common::unique("gh");
        let forge = format!(
            "github:\n  api_url: \"{}\"\n  repositories: [\"{REPO}\"]\n",
            github.api_url()
        );
        let config = daemon_rig::write_config_with(dir.path(), &instance, daemon_extra, &forge);
        World {
            dir,
            git,
            bare,
            github,
            model,
            instance,
            config,
        }
    }

    pub fn start(&self) -> DaemonProcess {
        let env = [
            ("GITHUB_TOKEN", TOKEN.to_owned()),
            ("OPENAI_API_KEY", MODEL_KEY.to_owned()),
            ("OPENAI_BASE_URL", self.model.base_url()),
        ];
        DaemonProcess::start(&self.config, &["run"], &env, &self.dir.path().join("daemon.log"))
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("daemon.log")
    }
}

pub fn edit_and_commit(scan_window: Duration) -> Vec<(Reply, Option<Duration>)> {
    vec![
        (
            call(
                "text_editor_str_replace",
                json!({"path": "/workspace/project/greet.py", "old_str": "Hello", "new_str": "Hello, world"}),
            ),
            None,
        ),
        (
            call(
                "command_executor_execute_command",
                json!({"command": "env; git add -A && git commit -qm 'Greet the whole world' && git log --oneline -3"}),
            ),
            // The model "thinks" a while: the test scans the live container meanwhile.
            Some(scan_window),
        ),
        (
            text("Changed the greeting in greet.py to greet the whole world."),
            None,
        ),
    ]
}
