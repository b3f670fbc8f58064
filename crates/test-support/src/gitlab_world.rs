//! A GitLab world for end-to-end tests: a fake GitLab with one project
//! (`acme/platform/app`) whose member maya has the Developer role, its real
//! git remote behind token auth, the turn-scripted model, and a daemon
//! config pointing at them.

use super::daemon_rig::{self, DaemonProcess};
use super::fake_gitlab::FakeGitLab;
use super::git_http::{self, GitHttpServer};
use super::scripted_model::{Reply, TurnModel};
use std::path::PathBuf;
use std::time::Duration;

pub const GL_TOKEN: &str = "glpat-e2eGitLabTokenThatMustNeverLeak";
pub const PROJECT: &str = "acme/platform/app";
pub const DONE: &str = "coding agent done";

pub struct GitLabWorld {
    pub dir: tempfile::TempDir,
    pub git: GitHttpServer,
    pub bare: PathBuf,
    pub gitlab: FakeGitLab,
    pub model: TurnModel,
    pub config: PathBuf,
    pub log: PathBuf,
}

impl GitLabWorld {
    /// The project holds `files`; `yaml` is more top-level config.
    pub async fn new(
        turns: Vec<(Reply, Option<Duration>)>,
        files: &[(&str, &str)],
        yaml: &str,
    ) -> GitLabWorld {
        GitLabWorld::with_daemon_settings(turns, files, "", yaml).await
    }

    /// The same, with more `daemon:` settings (indented YAML lines).
    pub async fn with_daemon_settings(
        turns: Vec<(Reply, Option<Duration>)>,
        files: &[(&str, &str)],
        daemon_extra: &str,
        yaml: &str,
    ) -> GitLabWorld {
        crate::ensure_images().await;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("git");
        let bare = git_http::bare_repo(&root, "acme/platform/app.git", files);
        let git = GitHttpServer::start(&root, "oauth2", GL_TOKEN).await;
        let gitlab = FakeGitLab::start(GL_TOKEN).await;
        gitlab.add_project(PROJECT, &git.url("acme/platform/app.git"));
        gitlab.set_repository(PROJECT, bare.clone());
        gitlab.add_member(PROJECT, "maya", 30);
        let model = TurnModel::start(turns).await;
        let config = daemon_rig::write_config_with(
            dir.path(),
            &crate::unique("test-gl"),
            daemon_extra,
            &format!(
                "gitlab:\n  url: \"{}\"\n  projects: [\"{PROJECT}\"]\n{yaml}",
                gitlab.url()
            ),
        );
        let log = dir.path().join("daemon.log");
        GitLabWorld {
            dir,
            git,
            bare,
            gitlab,
            model,
            config,
            log,
        }
    }

    pub fn start(&self) -> DaemonProcess {
        self.start_with(&[])
    }

    /// The daemon, with `more` in its environment.
    pub fn start_with(&self, more: &[(&'static str, String)]) -> DaemonProcess {
        let mut env = vec![
            ("GITLAB_TOKEN", GL_TOKEN.to_owned()),
            ("OPENAI_API_KEY", "sk-e2eGitLabModelKey0006".to_owned()),
            ("OPENAI_BASE_URL", self.model.base_url()),
        ];
        env.extend_from_slice(more);
        DaemonProcess::start(&self.config, &["run"], &env, &self.log)
    }

    /// Maya opens an issue and labels it; waits until it is done.
    pub async fn deliver(&self, title: &str, description: &str) -> u64 {
        let issue = self.gitlab.open_issue(PROJECT, "maya", title, description);
        self.gitlab.add_label(PROJECT, issue, "coding agent", "maya");
        daemon_rig::wait_until(
            "the done label",
            Duration::from_secs(180),
            async || self.gitlab.issue(PROJECT, issue).labels == vec![DONE.to_owned()],
            &self.log,
        )
        .await;
        issue
    }
}
