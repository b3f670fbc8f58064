//! A GitHub world for end-to-end tests: a fake GitHub with one repository,
//! its real git remote behind token auth, the turn-scripted model, and a
//! daemon config pointing at them.

use super::daemon_rig::{self, DaemonProcess};
use super::fake_github::FakeGitHub;
use super::git_http::{self, GitHttpServer};
use super::scripted_model::{Format, Reply, TurnModel};
use std::path::PathBuf;
use std::time::Duration;

/// An issue worked on to its end ([`World::run_to_end`]) and the daemon
/// that did it.
pub struct Ended {
    pub issue: u64,
    pub daemon: DaemonProcess,
}

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
    /// Further models, in the order the router falls back to them.
    pub fallbacks: Vec<TurnModel>,
    pub instance: String,
    pub config: PathBuf,
}

impl World {
    pub async fn new(turns: Vec<(Reply, Option<Duration>)>) -> World {
        World::with_daemon_settings(turns, "").await
    }

    /// `daemon_extra`: more `daemon:` settings, as indented YAML lines.
    pub async fn with_daemon_settings(turns: Vec<(Reply, Option<Duration>)>, daemon_extra: &str) -> World {
        World::build(turns, daemon_extra, None).await
    }

    /// A world whose tasks plan first (`planning.mode: single`); the model
    /// answers planning calls with `plan`.
    pub async fn with_planning(turns: Vec<(Reply, Option<Duration>)>, plan: &str) -> World {
        World::build(turns, "", Some(plan)).await
    }

    /// A planning world with more top-level YAML (e.g. `ideas:` settings,
    /// or keys under `planning:` as indented lines starting the text).
    pub async fn with_planning_yaml(turns: Vec<(Reply, Option<Duration>)>, plan: &str, yaml: &str) -> World {
        World::build_with(turns, "", Some(plan), yaml).await
    }

    /// A planning world whose model takes `delay` for every planning call;
    /// `yaml` may set `planning.mode` (as an indented first line).
    pub async fn with_slow_planning(
        turns: Vec<(Reply, Option<Duration>)>,
        plan: &str,
        delay: Duration,
        yaml: &str,
    ) -> World {
        World::build_full(turns, "", Some((plan, Some(delay))), "", yaml).await
    }

    /// More `daemon:` and `github:` settings, each as indented YAML lines.
    pub async fn with_settings(
        turns: Vec<(Reply, Option<Duration>)>,
        daemon_extra: &str,
        github_extra: &str,
    ) -> World {
        World::build_full(turns, daemon_extra, None, github_extra, "").await
    }

    async fn build(turns: Vec<(Reply, Option<Duration>)>, daemon_extra: &str, plan: Option<&str>) -> World {
        World::build_with(turns, daemon_extra, plan, "").await
    }

    async fn build_with(
        turns: Vec<(Reply, Option<Duration>)>,
        daemon_extra: &str,
        plan: Option<&str>,
        yaml: &str,
    ) -> World {
        World::build_full(turns, daemon_extra, plan.map(|p| (p, None)), "", yaml).await
    }

    /// A world whose repository holds `files` (instead of the usual
    /// greeting), with more top-level YAML for the daemon's config.
    pub async fn with_repository(
        turns: Vec<(Reply, Option<Duration>)>,
        files: &[(&str, &str)],
        yaml: &str,
    ) -> World {
        World::build_repo(turns, "", None, "", yaml, files).await
    }

    /// A planning world (`planning.mode: single`, planning calls answered
    /// with `plan`) whose repository holds `files`, with more top-level YAML.
    pub async fn with_planned_repository(
        turns: Vec<(Reply, Option<Duration>)>,
        files: &[(&str, &str)],
        plan: &str,
        yaml: &str,
    ) -> World {
        World::build_repo(turns, "", Some((plan, None)), "", yaml, files).await
    }

    /// `plan`: the planning answer and how long each planning call takes.
    async fn build_full(
        turns: Vec<(Reply, Option<Duration>)>,
        daemon_extra: &str,
        plan: Option<(&str, Option<Duration>)>,
        github_extra: &str,
        yaml: &str,
    ) -> World {
        let files = [("greet.py", "print('Hello')\n"), ("README.md", "# app\n")];
        World::build_repo(turns, daemon_extra, plan, github_extra, yaml, &files).await
    }

    async fn build_repo(
        turns: Vec<(Reply, Option<Duration>)>,
        daemon_extra: &str,
        plan: Option<(&str, Option<Duration>)>,
        github_extra: &str,
        yaml: &str,
        files: &[(&str, &str)],
    ) -> World {
        crate::ensure_images().await;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("git");
        let bare = git_http::bare_repo(&root, "acme/app.git", files);
        let git = GitHttpServer::start(&root, "x-access-token", TOKEN).await;
        let github = FakeGitHub::start(TOKEN).await;
        github.add_repo(REPO, &git.url("acme/app.git"), Some(bare.clone()));
        github.set_permission(REPO, "maya", "maintain");
        github.set_permission(REPO, "otto", "read");
        let model = TurnModel::start_with_slow_plan(
            turns,
            plan.map(|(text, _)| text.to_owned()),
            plan.and_then(|(_, delay)| delay),
        )
        .await;
        let instance = crate::unique("test-gh");
        let mut forge = format!(
            "github:\n  api_url: \"{}\"\n  repositories: [\"{REPO}\"]\n{github_extra}\n",
            github.api_url()
        );
        if plan.is_some() {
            forge.push_str("planning:\n");
            if !yaml.starts_with("  mode:") {
                forge.push_str("  mode: \"single\"\n");
            }
        }
        forge.push_str(yaml);
        let config = daemon_rig::write_config_with(dir.path(), &instance, daemon_extra, &forge);
        World {
            dir,
            git,
            bare,
            github,
            model,
            fallbacks: Vec::new(),
            instance,
            config,
        }
    }

    /// A world whose daemon uses `models` (a format and a model name each),
    /// in that order of preference, each on its own scripted server that
    /// answers by `turns` in its wire format and refuses what its provider
    /// refuses. Retries are off: an overloaded model falls back at once.
    pub async fn on_models(
        models: &[(Format, &str)],
        turns: Vec<(Reply, Option<Duration>)>,
        files: &[(&str, &str)],
    ) -> World {
        World::on_models_with(models, turns, files, "").await
    }

    /// The same, with more top-level YAML for the daemon's config (e.g. an
    /// `agent:` section).
    pub async fn on_models_with(
        models: &[(Format, &str)],
        turns: Vec<(Reply, Option<Duration>)>,
        files: &[(&str, &str)],
        extra_yaml: &str,
    ) -> World {
        let mut yaml = format!("{extra_yaml}llm:\n  retry:\n    max_retries: 0\n  models:\n");
        for (format, model) in models {
            let (provider, api) = match format {
                Format::OpenAi => ("openai", "chat_completions"),
                Format::Responses => ("openai", "responses"),
                Format::Anthropic => ("anthropic", "messages"),
                Format::Gemini => ("gemini", "generate_content"),
            };
            yaml.push_str(&format!(
                "    - {{provider: {provider}, model: \"{model}\", api: {api}, reasoning_effort: high}}\n"
            ));
        }
        let mut world = World::build_repo(turns.clone(), "", None, "", &yaml, files).await;
        let mut servers = Vec::new();
        for (format, _) in models {
            servers.push(TurnModel::start_as(*format, turns.clone(), None, None).await);
        }
        world.model = servers.remove(0);
        world.fallbacks = servers;
        world
    }

    /// The secrets and model addresses a forgehand process of this world gets.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let mut env = vec![("GITHUB_TOKEN", TOKEN.to_owned())];
        for model in std::iter::once(&self.model).chain(&self.fallbacks) {
            let (key, base) = match model.format {
                Format::OpenAi | Format::Responses => ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
                Format::Anthropic => ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
                Format::Gemini => ("GEMINI_API_KEY", "GEMINI_BASE_URL"),
            };
            env.push((key, MODEL_KEY.to_owned()));
            env.push((base, model.base_url()));
        }
        env
    }

    pub fn start(&self) -> DaemonProcess {
        DaemonProcess::start(&self.config, &["run"], &self.env(), &self.log_path())
    }

    /// The common scenario: an issue titled `title` labelled, a daemon
    /// started for it, and the issue's run waited for to its end (done or
    /// failed). The daemon is handed back for the test's own checks.
    pub async fn run_to_end(&self, title: &str) -> Ended {
        let issue = self.labelled_issue(title);
        let daemon = self.start();
        self.wait_for_end(issue).await;
        Ended { issue, daemon }
    }

    /// Asserts `issue` carries exactly `labels`, showing its progress
    /// comment and the daemon's log otherwise.
    pub fn assert_labels(&self, issue: u64, labels: &[&str], daemon: &DaemonProcess) {
        let found = self.github.issue(REPO, issue).labels;
        assert_eq!(
            found,
            labels.iter().map(|l| l.to_string()).collect::<Vec<_>>(),
            "the labels of issue #{issue}\n{}\n{}",
            self.progress_comment(issue),
            daemon.log_text()
        );
    }

    /// Waits until `issue` ends as done or failed.
    pub async fn wait_for_end(&self, issue: u64) {
        daemon_rig::wait_until(
            "the done or failed label",
            Duration::from_secs(180),
            // On GitHub the swap is two requests (add, then remove): wait
            // until the processing label is gone too.
            async || {
                let labels = self.github.issue(REPO, issue).labels;
                labels.iter().any(|l| l == DONE || l == "coding agent failed")
                    && !labels.iter().any(|l| l == "coding agent processing")
            },
            &self.log_path(),
        )
        .await;
    }

    /// Waits (up to `within`) until `number` is done: the done label on,
    /// the processing label off (on GitHub the swap is two requests).
    pub async fn wait_for_done(&self, number: u64, within: Duration) {
        daemon_rig::wait_until(
            "the done label",
            within,
            async || {
                let labels = self.github.issue(REPO, number).labels;
                labels.iter().any(|l| l == DONE) && !labels.iter().any(|l| l == "coding agent processing")
            },
            &self.log_path(),
        )
        .await;
    }

    /// Maya (a maintainer) opens an issue asking for the usual greeting
    /// change, titled `title`, and labels it for forgehand.
    pub fn labelled_issue(&self, title: &str) -> u64 {
        let issue =
            self.github
                .open_issue(REPO, "maya", title, "The greeting should say hello to the world.");
        self.github.add_label(REPO, issue, "coding agent", "maya");
        issue
    }

    /// Maya (a maintainer) opens the usual issue ("Greet the world"),
    /// comments `comments`, labels it; the daemon starts and delivers it.
    pub async fn deliver_greeting(&self, comments: &[&str]) -> (u64, DaemonProcess) {
        let issue = self.github.open_issue(
            REPO,
            "maya",
            "Greet the world",
            "The greeting should say hello to the world.",
        );
        for c in comments {
            self.github.comment(REPO, issue, "maya", c);
        }
        self.github.add_label(REPO, issue, "coding agent", "maya");
        let daemon = self.start();
        self.wait_for_end(issue).await;
        assert_eq!(
            self.github.issue(REPO, issue).labels,
            vec![DONE.to_owned()],
            "{}",
            daemon.log_text()
        );
        (issue, daemon)
    }

    /// The pull request the first run of `issue` opened (waits for that
    /// run to end done), then a writer's review comment on it (at line 1
    /// of `path`), then the follow-up run the review starts, to its end;
    /// the world's config sets a short `triggers.review_quiet`. Returns
    /// the pull request's number.
    pub async fn follow_up_by_review(&self, issue: u64, daemon: &DaemonProcess, path: &str) -> u64 {
        self.wait_for_end(issue).await;
        assert_eq!(
            self.github.issue(REPO, issue).labels,
            vec![DONE.to_owned()],
            "the first run: {}",
            daemon.log_text()
        );
        let pull = self.github.pulls(REPO)[0].number;
        self.github
            .review_comment(REPO, pull, "maya", path, 1, "Please look at this once more.");
        let ended = format!("task=acme/app#{pull}");
        daemon_rig::wait_until(
            "the review's follow-up to end",
            Duration::from_secs(240),
            async || {
                daemon
                    .log_text()
                    .lines()
                    .any(|l| l.contains(&ended) && l.contains("task ended"))
            },
            &self.log_path(),
        )
        .await;
        pull
    }

    /// The text of forgehand's progress comment on `number` (empty when none).
    pub fn progress_comment(&self, number: u64) -> String {
        self.github
            .issue(REPO, number)
            .comments
            .into_iter()
            .find(|c| c.1 == super::fake_github::BOT)
            .map(|c| c.2)
            .unwrap_or_default()
    }

    /// How many comments forgehand wrote on `number`.
    pub fn bot_comment_count(&self, number: u64) -> usize {
        self.github
            .issue(REPO, number)
            .comments
            .iter()
            .filter(|c| c.1 == super::fake_github::BOT)
            .count()
    }

    /// `number` ended done with one progress comment and one pull request
    /// from its branch.
    pub fn assert_delivered_once(&self, number: u64) {
        assert_eq!(
            self.github.issue(REPO, number).labels,
            vec![DONE.to_owned()],
            "issue #{number}: {}",
            std::fs::read_to_string(self.log_path()).unwrap_or_default()
        );
        assert_eq!(
            self.bot_comment_count(number),
            1,
            "issue #{number}: one progress comment"
        );
        let head = format!("forgehand/issue-{number}");
        assert_eq!(
            self.github.pulls(REPO).iter().filter(|p| p.head == head).count(),
            1,
            "issue #{number}: one pull request"
        );
    }

    /// `forgehand` with this world's config and `args`, to its end; its
    /// stdout (it must succeed).
    pub fn forgehand(&self, args: &[&str]) -> String {
        let out = std::process::Command::new(daemon_rig::bin())
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// The newest run's transcript of issue `number`, as `forgehand tasks
    /// show` prints it (read from the journal; the daemon may be running).
    pub fn transcript(&self, number: u64) -> String {
        self.transcript_of("issue", number)
    }

    /// The newest run's transcript of `number` of `kind` (`issue`, or
    /// `change` for a pull request).
    pub fn transcript_of(&self, kind: &str, number: u64) -> String {
        let listing = self.forgehand(&["tasks"]);
        let key = format!("github:{REPO}:{kind}:{number}");
        let id = listing
            .lines()
            .filter(|l| l.contains(&key))
            .find_map(|l| l.split_whitespace().next().filter(|w| w.parse::<u64>().is_ok()))
            .unwrap_or_else(|| panic!("no run of {key}:\n{listing}"))
            .to_owned();
        self.forgehand(&["tasks", "show", &id])
    }

    /// Waits until the daemon polled the repository's labelled issues twice
    /// after the fake's `from`-th request: proof that a whole poll cycle
    /// looked at what came before, for a test that asserts nothing happened.
    pub async fn two_polls_since(&self, from: usize) {
        crate::daemon_rig::wait_until(
            "two polls of the repository",
            Duration::from_secs(60),
            async || {
                self.github.requests()[from..]
                    .iter()
                    .filter(|r| r.starts_with(&format!("GET /repos/{REPO}/issues?state=open&labels=")))
                    .count()
                    >= 2
            },
            &self.log_path(),
        )
        .await;
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("daemon.log")
    }
}
