//! Preparing the task (the phase before planning): the repository's
//! settings and instructions read from the base branch, the sandbox made
//! from the image they choose, and
//! the repository's setup run in it, all before any model call when there
//! is setup to run (a broken file or a failed setup costs no tokens).

use super::snapshot::SnapshotPlan;
use super::*;
use crate::config::SetupFailure;
use crate::repo_settings::instructions::{AGENTS_FILE, FALLBACK_FILES};
use crate::repo_settings::{settings, Instructions, RepoSettings, SettingsError, SETTINGS_FILE};

/// Bytes of a failed setup's or test's output that reach the issue.
pub(super) const TAIL_CHARS: usize = 3000;

/// What the repository asks of the task.
pub(super) struct RepoEnvironment {
    pub settings: RepoSettings,
    pub instructions: Instructions,
    /// Whether the base branch has a settings file.
    pub has_file: bool,
}

/// A setup command that failed (or timed out), with the end of its output.
#[derive(Debug)]
pub(super) struct SetupFailed {
    pub command: String,
    pub outcome: String,
    pub tail: String,
    pub timed_out: bool,
}

impl SetupFailed {
    fn metric_outcome(&self) -> &'static str {
        if self.timed_out {
            "timed_out"
        } else {
            "failed"
        }
    }
}

impl TaskRun<'_> {
    /// Reads `.forgehand.yaml` and the instruction files from the base
    /// branch and merges the settings with the operator's.
    pub(super) async fn read_environment(
        &self,
        ws: &WorkspaceHandle,
        base: &str,
    ) -> Result<RepoEnvironment, TaskError> {
        let config = self.env.config.clone();
        let repository = self.item.repo.clone();
        let base = base.to_owned();
        let environment = ws
            .with(move |ws| -> Result<RepoEnvironment, TaskError> {
                let mut wanted = vec![SETTINGS_FILE.to_owned()];
                wanted.extend(FALLBACK_FILES.iter().map(|p| (*p).to_owned()));
                let agents_files = ws.base_paths_named(&base, AGENTS_FILE)?;
                wanted.extend(agents_files.iter().cloned());
                let mut files = ws.read_base(&base, &wanted)?;
                let file = match files.get(SETTINGS_FILE) {
                    Some(bytes) => {
                        let text = String::from_utf8(bytes.clone()).map_err(|_| {
                            TaskError::Settings(SettingsError::Syntax {
                                message: "the file is not UTF-8 text".into(),
                            })
                        })?;
                        Some(settings::parse_file(&text).map_err(TaskError::Settings)?)
                    }
                    None => None,
                };
                let language = crate::images::detect_language(&ws.checkout_dir());
                let resolved = settings::resolve(&config.repositories, &repository, file.as_ref(), language);
                if let Some(named) = &resolved.instructions {
                    files.extend(ws.read_base(&base, named)?);
                }
                let instructions = Instructions::gather(
                    resolved.instructions.as_deref(),
                    &|path| files.get(path).cloned(),
                    &agents_files,
                    config.repositories.instructions_tokens,
                );
                Ok(RepoEnvironment {
                    settings: resolved,
                    instructions,
                    has_file: file.is_some(),
                })
            })
            .await??;
        self.check_env_values(&environment.settings)?;
        Ok(environment)
    }

    /// A value equal to a configured secret would carry it into the sandbox.
    fn check_env_values(&self, settings: &RepoSettings) -> Result<(), TaskError> {
        for (name, value) in &settings.env {
            if !value.is_empty() && self.env.secrets.scrub(value) != *value {
                return Err(TaskError::Settings(SettingsError::Invalid {
                    key: format!("env.{name}"),
                    message: "the value holds one of forgehand's secrets; no secret ever enters a sandbox, so env holds plain settings only".into(),
                }));
            }
        }
        Ok(())
    }

    /// The progress lines about the repository's environment.
    pub(super) fn note_environment(&mut self, environment: &RepoEnvironment) {
        let s = &environment.settings;
        if environment.has_file {
            let mut parts = Vec::new();
            if !s.setup.is_empty() {
                parts.push(format!("{} setup command(s)", s.setup.len()));
            }
            if let Some(test) = &s.test {
                parts.push(format!("tests `{test}`"));
            }
            if !s.env.is_empty() {
                parts.push(format!("{} variable(s)", s.env.len()));
            }
            self.progress.note(format!(
                "Settings: `{SETTINGS_FILE}` from the default branch{}",
                if parts.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", parts.join(", "))
                }
            ));
        }
        for note in &s.notes {
            self.progress.note(note.clone());
        }
        if let Some(line) = environment.instructions.summary() {
            self.progress.note(line);
        }
    }

    /// The image the task's sandbox runs: a pin, the settings' choice, or
    /// detection.
    pub(super) fn choose_image(&self, checkout: &std::path::Path, settings: &RepoSettings) -> String {
        let config = &self.env.config;
        match (config.images.pins.get(&self.item.repo), &settings.image) {
            (Some(pinned), _) => pinned.clone(),
            (None, Some(chosen)) => crate::images::image_reference(&config.images, chosen),
            (None, None) => crate::images::image_for_repository(&config.images, &self.item.repo, checkout),
        }
    }

    /// The sandbox for the task, from `image`, holding the clone.
    pub(super) async fn start_sandbox(
        &self,
        checkout: &std::path::Path,
        settings: &RepoSettings,
        image: &str,
    ) -> Result<Arc<dyn Sandbox>, TaskError> {
        let spec = SandboxSpec {
            task_id: self.item.slug(),
            forge: self.item.forge.as_str().to_owned(),
            repository: self.item.repo.clone(),
            image: image.to_owned(),
            env: settings.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        };
        let sandbox: Arc<dyn Sandbox> = Arc::from(self.env.backend.prepare(&spec, Some(checkout)).await?);
        tracing::info!(task = %self.item, image = %spec.image, "sandbox ready");
        Ok(sandbox)
    }

    /// Runs the repository's setup commands in order, within
    /// `setup_timeout` in all. `Err(SetupFailed)`: one failed.
    pub(super) async fn run_setup(
        &self,
        sandbox: &dyn Sandbox,
        settings: &RepoSettings,
    ) -> Result<Result<Duration, SetupFailed>, TaskError> {
        let started = std::time::Instant::now();
        for command in &settings.setup {
            let left = settings.setup_timeout.saturating_sub(started.elapsed());
            if left.is_zero() {
                return Ok(Err(SetupFailed {
                    command: command.clone(),
                    outcome: format!(
                        "was not started: setup had used its {} (setup_timeout)",
                        humantime::format_duration(settings.setup_timeout)
                    ),
                    tail: String::new(),
                    timed_out: true,
                }));
            }
            tracing::info!(task = %self.item, command = %command, "running setup");
            let output = sandbox
                .exec(
                    &format!("{{ {command}\n}} 2>&1"),
                    Some(left.max(Duration::from_secs(1))),
                )
                .await?;
            if !output.success() {
                let outcome = if output.timed_out {
                    format!(
                        "did not finish within the setup's {} (setup_timeout)",
                        humantime::format_duration(settings.setup_timeout)
                    )
                } else {
                    format!("exited with code {}", output.exit_code.unwrap_or(-1))
                };
                return Ok(Err(SetupFailed {
                    command: command.clone(),
                    outcome,
                    tail: tail(&output.stdout, TAIL_CHARS),
                    timed_out: output.timed_out,
                }));
            }
        }
        Ok(Ok(started.elapsed()))
    }

    /// Setup for `settings` in `sandbox`, with the outcome on the comment.
    /// A failure stops the task unless the operator lets it go on.
    pub(super) async fn setup(
        &mut self,
        sandbox: &dyn Sandbox,
        settings: &RepoSettings,
        checkout: &std::path::Path,
        image: &str,
        snapshot: Option<SnapshotPlan>,
    ) -> Result<(), TaskError> {
        if settings.setup.is_empty() {
            return Ok(());
        }
        if let Some(egress) = sandbox.egress() {
            egress.set_phase("setup", settings.setup_hosts.clone());
        }
        self.progress.at(
            Step::Change,
            format!("Setting up the repository ({} command(s))", settings.setup.len()),
        );
        self.report().await;
        let phase = crate::sandbox::phase_processes::phase_start(sandbox).await?;
        let outcome = self.run_setup(sandbox, settings).await?;
        // What setup left running (a daemon it started, a process that
        // escaped its group) must not run on beside the model.
        let ended = crate::sandbox::phase_processes::end_phase(sandbox, phase).await?;
        if ended > 0 {
            tracing::warn!(task = %self.item, processes = ended, "setup left processes running; they were ended");
            self.progress
                .note(format!("Setup: ended {ended} process(es) it left running"));
        }
        match outcome {
            Ok(took) => {
                crate::metrics::global().repository_step("setup", "passed");
                self.progress
                    .note(format!("Setup: done in {:.1} s", took.as_secs_f64()));
                if let Some(plan) = snapshot {
                    self.save_snapshot(sandbox, checkout, plan, image, settings, took)
                        .await;
                }
                Ok(())
            }
            Err(failed) => {
                let text = self.env.secrets.scrub(&failed.tail);
                crate::metrics::global().repository_step("setup", failed.metric_outcome());
                if self.env.config.repositories.on_setup_failure == SetupFailure::Continue {
                    self.progress.note(format!(
                        "Setup failed: `{}` {}; the model works without it (repositories.on_setup_failure: continue)",
                        failed.command, failed.outcome
                    ));
                    return Ok(());
                }
                Err(TaskError::SetupFailed(SetupFailed { tail: text, ..failed }))
            }
        }
    }
}

impl TaskRun<'_> {
    /// From here on the sandbox may reach only the agent's hosts; what
    /// setup reached goes on the comment.
    pub(super) fn enter_agent_phase(&mut self, sandbox: &dyn Sandbox, settings: &RepoSettings) {
        match sandbox.egress() {
            Some(egress) => {
                if let Some(line) = egress.summary("setup") {
                    self.progress.note(format!("Network: {line}"));
                }
                egress.set_phase("agent", settings.agent_hosts.clone());
            }
            None if !settings.setup.is_empty() || !settings.agent_hosts.is_empty() => {
                self.progress.note(
                    "Network: none (this sandbox has no forgehand supervisor, so `network` settings cannot apply)",
                );
            }
            None => {}
        }
    }
}

/// The last `max` characters of `text`, from a line start when one is near.
pub(super) fn tail(text: &str, max: usize) -> String {
    let text = text.trim_end();
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let start = text.char_indices().rev().nth(max - 1).map_or(0, |(i, _)| i);
    let cut = &text[start..];
    let from_line = cut.find('\n').filter(|i| *i < 200).map_or(cut, |i| &cut[i + 1..]);
    format!("[… earlier output left out]\n{from_line}")
}

impl std::fmt::Display for SetupFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the repository's setup failed: `{}` {}",
            self.command, self.outcome
        )
    }
}

#[cfg(test)]
mod tests {
    use super::tail;

    #[test]
    fn tails_keep_the_end_from_a_line_start() {
        assert_eq!(tail("short\n", 100), "short");
        let long = (0..100)
            .map(|i| format!("line {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        let kept = tail(&long, 30);
        assert!(kept.starts_with("[… earlier output left out]\nline"), "{kept}");
        assert!(kept.ends_with("line 99"));
        assert!(kept.len() < 80);
    }
}
