//! What an evaluation found: one result per instance (kept as JSON Lines,
//! which is what resuming reads), SWE-bench's predictions, and the totals as
//! a table and as JSON.

use super::score::{Status, TestOutcome};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One finished instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceResult {
    pub instance_id: String,
    pub status: Status,
    /// How the task ended (`delivered`, `no_changes`, `failed`, ...).
    pub task: String,
    /// The task's reason or address, when it has one.
    #[serde(default)]
    pub task_detail: String,
    pub model_patch: String,
    pub tests: Vec<(String, TestOutcome)>,
    pub note: Option<String>,
    pub cost_usd: f64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub model_calls: u64,
    pub wall_ms: u64,
    /// Of `wall_ms`, waiting on the models.
    pub model_ms: u64,
    /// Of `wall_ms`, scoring's setup and tests.
    pub tests_ms: u64,
}

impl InstanceResult {
    /// The time the evaluation itself took: neither the models nor the tests.
    pub fn overhead_ms(&self) -> u64 {
        self.wall_ms.saturating_sub(self.model_ms + self.tests_ms)
    }
}

/// A line of `preds.jsonl`, as SWE-bench's harness reads it.
#[derive(Debug, Serialize)]
pub struct Prediction<'a> {
    pub instance_id: &'a str,
    pub model_name_or_path: &'a str,
    pub model_patch: &'a str,
}

/// The totals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Totals {
    pub instances: usize,
    pub resolved: usize,
    pub unresolved: usize,
    pub errors: usize,
    /// Resolved among those that could be judged and all, in percent.
    pub resolved_percent: f64,
    pub cost_usd: f64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub wall_ms: u64,
    pub overhead_ms: u64,
}

impl Totals {
    pub fn of(results: &[InstanceResult]) -> Totals {
        let count = |status: Status| results.iter().filter(|r| r.status == status).count();
        let resolved = count(Status::Resolved);
        Totals {
            instances: results.len(),
            resolved,
            unresolved: count(Status::Unresolved),
            errors: count(Status::Error),
            resolved_percent: match results.len() {
                0 => 0.0,
                n => 100.0 * resolved as f64 / n as f64,
            },
            cost_usd: results.iter().map(|r| r.cost_usd).sum(),
            input_tokens: results.iter().map(|r| r.input_tokens).sum(),
            output_tokens: results.iter().map(|r| r.output_tokens).sum(),
            wall_ms: results.iter().map(|r| r.wall_ms).sum(),
            overhead_ms: results.iter().map(InstanceResult::overhead_ms).sum(),
        }
    }
}

/// The report as `report.json` has it.
#[derive(Debug, Serialize)]
pub struct Report<'a> {
    pub model_name_or_path: &'a str,
    pub totals: Totals,
    pub instances: &'a [InstanceResult],
}

/// The results kept in `path` (none when it does not exist yet). A line
/// cut short by an interruption is skipped: that instance runs again.
pub fn read_results(path: &Path) -> std::io::Result<Vec<InstanceResult>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    Ok(text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|line| match serde_json::from_str(line) {
            Ok(result) => Some(result),
            Err(e) => {
                tracing::warn!(
                    "{}: a result that cannot be read is run again: {e}",
                    path.display()
                );
                None
            }
        })
        .collect())
}

/// The table printed at the end: one row per instance, then the totals.
pub fn table(results: &[InstanceResult]) -> String {
    let width = results
        .iter()
        .map(|r| r.instance_id.chars().count())
        .max()
        .unwrap_or(8)
        .max(8);
    let mut out = format!(
        "{:<width$}  {:<10}  {:<10}  {:>9}  {:>10}  {:>9}  {:>9}\n",
        "instance", "status", "task", "cost", "tokens", "wall", "overhead"
    );
    for r in results {
        out.push_str(&format!(
            "{:<width$}  {:<10}  {:<10}  {:>9}  {:>10}  {:>9}  {:>9}\n",
            r.instance_id,
            r.status.as_str(),
            r.task,
            format!("${:.4}", r.cost_usd),
            r.input_tokens + r.output_tokens,
            seconds(r.wall_ms),
            seconds(r.overhead_ms()),
        ));
        if r.task == "failed" {
            out.push_str(&format!("{:<width$}  (the task failed: {})\n", "", r.task_detail));
        }
        if let Some(note) = &r.note {
            out.push_str(&format!("{:<width$}  ({note})\n", ""));
        }
    }
    let t = Totals::of(results);
    out.push_str(&format!(
        "\nResolved {} of {} ({:.1} %); {} unresolved, {} error(s). Cost ${:.4}, {} input and {} output tokens, {} in all ({} of it the evaluation's own overhead).\n",
        t.resolved,
        t.instances,
        t.resolved_percent,
        t.unresolved,
        t.errors,
        t.cost_usd,
        t.input_tokens,
        t.output_tokens,
        seconds(t.wall_ms),
        seconds(t.overhead_ms),
    ));
    out
}

fn seconds(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}
