//! Scoring one instance as SWE-bench's harness does, in a sandbox of its
//! own: the base commit, the model's patch, then the instance's test patch;
//! the repository's setup; then each named test. Resolved when every
//! FAIL_TO_PASS and PASS_TO_PASS test passes. A test that could not run at
//! all (its command missing, killed, timed out), a test patch that does not
//! apply or a setup that fails make the instance an error, not a failure:
//! they say nothing of the model.

use super::instance::Instance;
use super::origin;
use crate::config::Config;
use crate::forge::ItemRef;
use crate::repo_settings::{settings, RepoSettings, SETTINGS_FILE};
use crate::sandbox::{Sandbox, SandboxBackend, SandboxSpec};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::{Duration, Instant};

/// Exit codes of a shell whose command could not be run: not executable,
/// not found.
const COULD_NOT_RUN: [i64; 2] = [126, 127];

/// How one named test ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestOutcome {
    Passed,
    Failed,
    /// It never really ran (why).
    Error(String),
}

/// An instance's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Resolved,
    Unresolved,
    /// The instance could not be judged (its tests did not run, its
    /// repository could not be had, the pipeline broke).
    Error,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Resolved => "resolved",
            Status::Unresolved => "unresolved",
            Status::Error => "error",
        }
    }
}

/// What scoring found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scored {
    pub status: Status,
    /// Each test with its outcome, FAIL_TO_PASS first.
    pub tests: Vec<(String, TestOutcome)>,
    /// Why it is an error, or what else is worth knowing.
    pub note: Option<String>,
    /// Time spent running setup and the test commands (the eval's
    /// overhead leaves it out; the checkout and the sandbox's start are
    /// overhead).
    pub tests_ms: u64,
}

impl Scored {
    /// An error of the instance, after `tests_ms` of setup and tests.
    pub(super) fn error(note: String, tests_ms: u64) -> Scored {
        Scored {
            status: Status::Error,
            tests: Vec::new(),
            note: Some(note),
            tests_ms,
        }
    }
}

/// What scoring needs of the evaluation.
pub struct Scoring<'a> {
    pub config: &'a Config,
    pub backend: &'a dyn SandboxBackend,
    /// Longest run of one test command.
    pub test_timeout: Duration,
}

impl Scoring<'_> {
    /// Scores `patch` for `instance` (the task `item`), whose repository is
    /// at `origin`, in a checkout made at `checkout`.
    pub async fn score(
        &self,
        instance: &Instance,
        item: &ItemRef,
        (origin, checkout): (&Path, &Path),
        patch: &str,
    ) -> Scored {
        let repository = item.repo.as_str();
        let settings =
            match prepared_checkout(self.config, instance, repository, (origin, checkout), patch).await {
                Ok(Ok(settings)) => settings,
                Ok(Err(scored_early)) => return scored_early,
                Err(message) => return Scored::error(message, 0),
            };
        let image = crate::images::chosen_image(
            &self.config.images,
            repository,
            settings.image.as_deref(),
            crate::images::detect_language(checkout),
        );
        let spec = SandboxSpec {
            task_id: format!("{}-score", item.slug()),
            forge: item.forge.as_str().to_owned(),
            repository: repository.to_owned(),
            image,
            env: settings.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        };
        let sandbox = match self.backend.prepare(&spec, Some(checkout)).await {
            Ok(sandbox) => sandbox,
            Err(e) => return Scored::error(format!("the scoring sandbox did not start: {e}"), 0),
        };
        let scored = self.run_tests(sandbox.as_ref(), instance, &settings).await;
        if let Err(e) = sandbox.remove().await {
            tracing::warn!(instance = %instance.instance_id, "cannot remove the scoring sandbox: {e}");
        }
        scored
    }

    async fn run_tests(&self, sandbox: &dyn Sandbox, instance: &Instance, settings: &RepoSettings) -> Scored {
        let started = Instant::now();
        if let Err(message) = setup(sandbox, settings).await {
            return Scored::error(message, started.elapsed().as_millis() as u64);
        }
        if let Some(egress) = sandbox.egress() {
            egress.set_phase("agent", settings.agent_hosts.clone());
        }
        let mut tests = Vec::new();
        for name in instance.fail_to_pass.iter().chain(&instance.pass_to_pass) {
            let outcome = match sandbox
                .exec(&instance.command_for(name), Some(self.test_timeout))
                .await
            {
                Ok(out) if out.timed_out => TestOutcome::Error(format!(
                    "timed out after {}",
                    humantime::format_duration(self.test_timeout)
                )),
                Ok(out) if out.exit_code == Some(0) => TestOutcome::Passed,
                Ok(out) => match out.exit_code {
                    Some(code) if COULD_NOT_RUN.contains(&code) || code > 128 => TestOutcome::Error(format!(
                        "exit code {code}: {}",
                        super::last_line(&format!("{}{}", out.stdout, out.stderr))
                    )),
                    _ => TestOutcome::Failed,
                },
                Err(e) => TestOutcome::Error(e.to_string()),
            };
            tests.push((name.clone(), outcome));
        }
        verdict(tests, started)
    }
}

/// Resolved, unresolved or error, from the tests' outcomes.
fn verdict(tests: Vec<(String, TestOutcome)>, started: Instant) -> Scored {
    let errors: Vec<String> = tests
        .iter()
        .filter_map(|(name, outcome)| match outcome {
            TestOutcome::Error(why) => Some(format!("{name}: {why}")),
            _ => None,
        })
        .collect();
    let status = if !errors.is_empty() {
        Status::Error
    } else if tests.iter().all(|(_, o)| *o == TestOutcome::Passed) {
        Status::Resolved
    } else {
        Status::Unresolved
    };
    Scored {
        status,
        note: (!errors.is_empty()).then(|| format!("tests did not run: {}", errors.join("; "))),
        tests,
        tests_ms: started.elapsed().as_millis() as u64,
    }
}

/// The checkout with both patches, and the repository's settings as its
/// base commit has them. `Ok(Err(_))`: judged already (the model's patch
/// does not apply); `Err`: an error of the instance.
async fn prepared_checkout(
    config: &Config,
    instance: &Instance,
    repository: &str,
    (origin, checkout): (&Path, &Path),
    patch: &str,
) -> Result<Result<RepoSettings, Scored>, String> {
    let (origin_dir, checkout_dir) = (origin.to_owned(), checkout.to_owned());
    let (model_patch, test_patch) = (patch.to_owned(), instance.test_patch.clone().unwrap_or_default());
    let applied = tokio::task::spawn_blocking(move || {
        origin::checkout_with(
            &checkout_dir,
            &origin_dir,
            &[model_patch.as_str(), test_patch.as_str()],
        )
    })
    .await
    .map_err(|e| format!("the checkout stopped: {e}"))?
    .map_err(|e| e.to_string())?;
    match applied {
        Ok(()) => {}
        Err((0, why)) => {
            return Ok(Err(Scored {
                status: Status::Unresolved,
                tests: Vec::new(),
                note: Some(format!("the model's patch does not apply: {why}")),
                tests_ms: 0,
            }))
        }
        Err((_, why)) => return Err(format!("the instance's test_patch does not apply: {why}")),
    }
    let file = match origin::base_file(origin, SETTINGS_FILE).map_err(|e| e.to_string())? {
        Some(text) => Some(settings::parse_file(&text).map_err(|e| e.to_string())?),
        None => None,
    };
    let language = crate::images::detect_language(checkout);
    Ok(Ok(settings::resolve(
        &config.repositories,
        repository,
        file.as_ref(),
        language,
    )))
}

/// Runs the repository's setup commands, with its setup allowlist and
/// without the egress credentials: the checkout holds the model's patch,
/// whose code setup may run (a `preinstall` hook, a `setup.py`), as a
/// follow-up's setup does not get them either.
async fn setup(sandbox: &dyn Sandbox, settings: &RepoSettings) -> Result<(), String> {
    if let Some(egress) = sandbox.egress() {
        egress.set_phase_without_credentials("setup", settings.setup_hosts.clone());
    }
    match crate::repo_settings::setup::run(sandbox, settings).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(failed)) => Err(format!("{failed}: {}", super::last_line(&failed.tail))),
        Err(e) => Err(format!("the repository's setup could not run: {e}")),
    }
}
