//! `forgehand eval INSTANCES.jsonl`: SWE-bench-style instances run through
//! the same pipeline as a labelled issue (claim, preparation, planning,
//! the sandbox and the agent, tests, push, delivery) against a local
//! forge, then scored in a sandbox of their own.
//!
//! The output folder holds everything, and makes a run resumable:
//! ```text
//! results.jsonl            one finished instance a line (what resuming skips)
//! preds.jsonl              SWE-bench's predictions, for its harness
//! report.json              the totals and every instance
//! runs/<id>.md             the progress comment the task wrote
//! transcripts/<id>.jsonl   the run's transcript
//! repos/, work/, state/    mirrors, origins and checkouts, the journal
//! ```

mod credentials;
mod forge;
pub mod instance;
pub mod make;
mod meter;
mod origin;
pub mod report;
mod score;
mod start;

pub use score::{Status, TestOutcome};
pub use start::{default_model_name, environment};

use crate::forge::ItemRef;
use crate::task::{TaskEnd, TaskEnv};
use forge::LocalForge;
use futures_util::StreamExt;
use instance::Instance;
use report::{InstanceResult, Prediction, Report, Totals};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How to run an evaluation.
#[derive(Debug, Clone)]
pub struct Options {
    pub instances: PathBuf,
    /// The output folder (see the module's documentation).
    pub out: PathBuf,
    pub concurrency: usize,
    /// `model_name_or_path` in the predictions.
    pub model_name: String,
    /// For instances without a `test_command`.
    pub test_command: Option<String>,
    /// Longest run of one test command while scoring.
    pub test_timeout: Duration,
    /// Draw a progress bar (on a terminal).
    pub progress: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error(transparent)]
    Instances(#[from] instance::InstanceError),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The environment could not be built (what to fix).
    #[error("{0}")]
    Setup(String),
    #[error("{left} instance(s) not finished (interrupted, or their repository could not be reached); run the same command again to resume (finished instances are kept)")]
    Interrupted { left: usize },
}

/// The output folder's files.
struct Files {
    out: PathBuf,
}

impl Files {
    fn results(&self) -> PathBuf {
        self.out.join("results.jsonl")
    }
    fn mirrors(&self) -> PathBuf {
        self.out.join("repos")
    }
    fn work(&self, item: &ItemRef) -> PathBuf {
        self.out.join("work").join(item.slug())
    }
}

/// The folder `forgehand eval` keeps its journal in: an evaluation never
/// shares the daemon's.
pub fn state_dir(out: &Path) -> PathBuf {
    out.join("state")
}

/// Reads the instances file named in `options` (refused whole, with the
/// bad line named, before anything runs).
pub fn read_instances(options: &Options) -> Result<Vec<Instance>, EvalError> {
    Ok(instance::read(
        &options.instances,
        options.test_command.as_deref(),
    )?)
}

/// Runs every instance not finished in an earlier run; all results, in
/// the instances' order.
pub async fn run(
    env: Arc<TaskEnv>,
    instances: &[Instance],
    options: &Options,
    shutdown: CancellationToken,
) -> Result<Vec<InstanceResult>, EvalError> {
    let files = Files {
        out: options.out.clone(),
    };
    let write_error = |path: &Path| {
        let path = path.to_owned();
        move |source| EvalError::Write { path, source }
    };
    std::fs::create_dir_all(&files.out).map_err(write_error(&files.out))?;
    let kept = report::read_results(&files.results()).map_err(write_error(&files.results()))?;
    let pending: Vec<Instance> = instances
        .iter()
        .filter(|i| !kept.iter().any(|r| r.instance_id == i.instance_id))
        .cloned()
        .collect();
    if !kept.is_empty() {
        tracing::info!(
            finished = instances.len() - pending.len(),
            left = pending.len(),
            "resuming: finished instances are not run again"
        );
    }
    let bar = progress_bar(options.progress, instances.len(), instances.len() - pending.len());
    let mut sink = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(files.results())
        .map_err(write_error(&files.results()))?;
    let runner = Runner {
        env: &env,
        options,
        files: &files,
        mirrors: tokio::sync::Mutex::new(()),
        shutdown: &shutdown,
    };
    let left = pending.len();
    let mut results = kept;
    let mut finished = 0;
    let mut done = futures_util::stream::iter(pending.iter().map(|i| runner.run_one(i)))
        .buffer_unordered(options.concurrency.max(1));
    while let Some(result) = done.next().await {
        let Some(result) = result else { continue };
        let line = serde_json::to_string(&result).unwrap_or_default();
        writeln!(sink, "{line}")
            .and_then(|()| sink.flush())
            .map_err(write_error(&files.results()))?;
        bar.inc(1);
        bar.println(format!("{}: {}", result.instance_id, result.status.as_str()));
        results.push(result);
        finished += 1;
    }
    bar.finish_and_clear();
    let all = ordered(instances, results);
    write_outputs(&files, &options.model_name, &all)?;
    if finished < left {
        return Err(EvalError::Interrupted {
            left: left - finished,
        });
    }
    Ok(all)
}

/// The bar on stderr: drawn on a terminal only.
fn progress_bar(shown: bool, total: usize, done: usize) -> indicatif::ProgressBar {
    if !shown {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total as u64);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} instances ({eta} left)",
    ) {
        bar.set_style(style);
    }
    bar.set_position(done as u64);
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// The results of `instances`, in their order (the last result of each).
fn ordered(instances: &[Instance], results: Vec<InstanceResult>) -> Vec<InstanceResult> {
    instances
        .iter()
        .filter_map(|i| {
            results
                .iter()
                .rev()
                .find(|r| r.instance_id == i.instance_id)
                .cloned()
        })
        .collect()
}

/// `preds.jsonl` and `report.json`.
fn write_outputs(files: &Files, model_name: &str, results: &[InstanceResult]) -> Result<(), EvalError> {
    let mut preds = String::new();
    for r in results {
        let line = serde_json::to_string(&Prediction {
            instance_id: &r.instance_id,
            model_name_or_path: model_name,
            model_patch: &r.model_patch,
        })
        .unwrap_or_default();
        preds.push_str(&line);
        preds.push('\n');
    }
    let report = Report {
        model_name_or_path: model_name,
        totals: Totals::of(results),
        instances: results,
    };
    let json = serde_json::to_string_pretty(&report).unwrap_or_default();
    for (name, text) in [("preds.jsonl", preds), ("report.json", json)] {
        let path = files.out.join(name);
        std::fs::write(&path, text).map_err(|source| EvalError::Write { path, source })?;
    }
    Ok(())
}

/// What every instance's run shares.
struct Runner<'a> {
    env: &'a Arc<TaskEnv>,
    options: &'a Options,
    files: &'a Files,
    /// One fetch into the mirrors at a time.
    mirrors: tokio::sync::Mutex<()>,
    shutdown: &'a CancellationToken,
}

impl Runner<'_> {
    /// One instance, start to score; `None` when it was interrupted (it
    /// runs again, resumed, next time).
    async fn run_one(&self, instance: &Instance) -> Option<InstanceResult> {
        if self.shutdown.is_cancelled() {
            return None;
        }
        let started = Instant::now();
        let item = instance.item();
        let work = self.files.work(&item);
        let origin = work.join("origin.git");
        let base = match self.origin_for(instance, &item, &origin).await {
            Ok(base) => base,
            Err(OriginFailure {
                message,
                retryable: true,
            }) => {
                tracing::warn!(instance = %instance.instance_id, "repository not reached ({message}); the instance runs next time");
                return None;
            }
            Err(OriginFailure { message, .. }) => return Some(not_started(instance, message, started)),
        };
        let (end, used) = self.run_task(instance, &item, &origin).await?;
        let patch = {
            let origin = origin.clone();
            tokio::task::spawn_blocking(move || origin::patch(&origin, base))
                .await
                .map_err(|e| e.to_string())
                .and_then(|p| p.map_err(|e| e.to_string()))
        };
        let scored = match &patch {
            Ok(patch) => {
                let scoring = score::Scoring {
                    config: &self.env.config,
                    backend: self.env.backend.as_ref(),
                    test_timeout: self.options.test_timeout,
                };
                scoring
                    .score(instance, &item, (&origin, &work.join("score")), patch)
                    .await
            }
            Err(message) => score::Scored::error(format!("cannot read the pushed change: {message}"), 0),
        };
        let result = InstanceResult {
            instance_id: instance.instance_id.clone(),
            status: scored.status,
            task: end.outcome().to_owned(),
            task_detail: end.detail(),
            model_patch: patch.unwrap_or_default(),
            tests: scored.tests,
            note: scored.note,
            cost_usd: used.cost_usd,
            input_tokens: used.input_tokens,
            output_tokens: used.output_tokens,
            model_calls: used.calls,
            wall_ms: started.elapsed().as_millis() as u64,
            model_ms: used.waited.as_millis() as u64,
            tests_ms: scored.tests_ms,
        };
        tracing::info!(instance = %instance.instance_id, status = result.status.as_str(), task = %result.task, "instance scored");
        Some(result)
    }

    /// The instance's task, through the whole pipeline against its local
    /// forge, with its model use counted; `None` when it did not finish.
    async fn run_task(
        &self,
        instance: &Instance,
        item: &ItemRef,
        origin: &Path,
    ) -> Option<(TaskEnd, meter::ModelUse)> {
        let forge = Arc::new(LocalForge::new(
            item.clone(),
            &instance.problem_statement,
            &self.env.config.labels.trigger,
            &origin::url(origin),
            origin::BASE_BRANCH,
        ));
        let metered = Arc::new(crate::llm::observed::Observed::new(
            self.env.model.clone(),
            meter::Meter::new(crate::llm::router::price_table(&self.env.config.llm)),
        ));
        let env = TaskEnv {
            model: metered.clone(),
            ..(**self.env).clone()
        };
        tracing::info!(instance = %instance.instance_id, "instance started");
        let end = crate::task::run(&env, forge.clone(), item.clone(), self.shutdown.clone()).await;
        if matches!(end, TaskEnd::Interrupted | TaskEnd::Deferred { .. }) {
            tracing::warn!(instance = %instance.instance_id, "instance not finished ({end:?}); it runs again next time");
            return None;
        }
        self.keep_records(instance, item, &forge);
        Some((end, metered.observer.used()))
    }

    /// The instance's origin: kept when its task is unfinished in the
    /// journal (it resumes on what it pushed), else made afresh. The base
    /// commit.
    async fn origin_for(
        &self,
        instance: &Instance,
        item: &ItemRef,
        origin: &Path,
    ) -> Result<git2::Oid, OriginFailure> {
        let resuming = self
            .env
            .journal
            .unfinished()
            .map(|records| records.iter().any(|r| r.key == item.key()))
            .unwrap_or(false);
        let source = instance.source();
        let credentials = credentials::for_source(&self.env.config, &self.env.secrets, &source).await;
        let _one_at_a_time = self.mirrors.lock().await;
        let (mirrors, origin) = (self.files.mirrors(), origin.to_owned());
        let commit = instance.base_commit.trim().to_owned();
        tokio::task::spawn_blocking(move || {
            let (mirror, base) = origin::mirror(&mirrors, (&source, credentials.as_ref()), &commit)?;
            if !(resuming && origin.exists()) {
                origin::make(&origin, &mirror, base)?;
            }
            Ok::<_, origin::OriginError>(base)
        })
        .await
        .map_err(|e| OriginFailure {
            message: e.to_string(),
            retryable: false,
        })?
        .map_err(|e| OriginFailure {
            retryable: matches!(&e, origin::OriginError::Git(git) if git.is_retryable()),
            message: e.to_string(),
        })
    }

    /// The task's last progress comment and its transcript, kept in the
    /// output folder.
    fn keep_records(&self, instance: &Instance, item: &ItemRef, forge: &LocalForge) {
        let id = &instance.instance_id;
        let mut records = Vec::new();
        if let Some(comment) = forge.comments_written().last() {
            records.push((
                self.files.out.join("runs").join(format!("{id}.md")),
                comment.clone(),
            ));
        }
        let journal = &self.env.journal;
        if let Ok(Some(run)) = journal.last_run_of(&item.key()) {
            if let Ok(Some(jsonl)) = crate::transcript::render_jsonl(journal, run) {
                records.push((
                    self.files.out.join("transcripts").join(format!("{id}.jsonl")),
                    jsonl,
                ));
            }
        }
        for (path, text) in records {
            let written = path
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::write(&path, text));
            if let Err(e) = written {
                tracing::warn!(instance = %id, "cannot write {}: {e}", path.display());
            }
        }
    }
}

/// Why an instance's repository could not be had, and whether a later run
/// may have it (the network, not the instance).
struct OriginFailure {
    message: String,
    retryable: bool,
}

/// An instance whose task never started (its repository could not be had).
fn not_started(instance: &Instance, message: String, started: Instant) -> InstanceResult {
    tracing::warn!(instance = %instance.instance_id, "instance not run: {message}");
    InstanceResult {
        instance_id: instance.instance_id.clone(),
        status: Status::Error,
        task: "not_started".into(),
        task_detail: String::new(),
        model_patch: String::new(),
        tests: Vec::new(),
        note: Some(message),
        cost_usd: 0.0,
        input_tokens: 0,
        output_tokens: 0,
        model_calls: 0,
        wall_ms: started.elapsed().as_millis() as u64,
        model_ms: 0,
        tests_ms: 0,
    }
}

/// The last non-empty line of `text`, cut to 300 characters.
fn last_line(text: &str) -> String {
    let line = text
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    line.chars().take(300).collect()
}
