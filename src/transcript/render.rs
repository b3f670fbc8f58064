//! A transcript as text for the terminal, and as JSON Lines.

use super::Entry;
use crate::journal::{Journal, JournalError, RunRecord};
use std::fmt::Write as _;

/// Lines of a long text shown before "…".
const SHOWN_LINES: usize = 40;

/// A moment of a run, as both renderings show it.
pub(super) fn when(seconds: i64) -> String {
    chrono::DateTime::from_timestamp(seconds, 0)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_default()
}

/// The newest runs, one a line, for `forgehand tasks`.
pub fn render_runs(runs: &[RunRecord]) -> String {
    let mut out = format!(
        "Runs (newest {}; `forgehand tasks show ID` prints one)\n",
        runs.len()
    );
    for run in runs {
        let _ = writeln!(
            out,
            "  {:>6}  {}  {}  {}",
            run.id,
            when(run.started_at),
            run.task_key,
            run.outcome.as_deref().unwrap_or("running")
        );
    }
    out
}

/// Run `id`'s transcript as text; `None` when there is no such run.
pub fn render_text(journal: &Journal, id: i64) -> Result<Option<String>, JournalError> {
    let Some((run, entries)) = super::load(journal, id)? else {
        return Ok(None);
    };
    let mut out = format!(
        "Run {} of {}, started {}, {}\n",
        run.id,
        run.task_key,
        when(run.started_at),
        run.outcome.as_deref().unwrap_or("still running")
    );
    for entry in &entries {
        write_entry(&mut out, entry);
    }
    Ok(Some(out))
}

/// Run `id`'s entries as JSON Lines, each with its run and time.
pub fn render_jsonl(journal: &Journal, id: i64) -> Result<Option<String>, JournalError> {
    if journal.run_record(id)?.is_none() {
        return Ok(None);
    }
    let mut out = String::new();
    for (at_ms, json) in journal.entries(id)? {
        let mut value: serde_json::Value = serde_json::from_str(&json).unwrap_or(serde_json::Value::Null);
        if let Some(object) = value.as_object_mut() {
            object.insert("run".into(), id.into());
            object.insert("at_ms".into(), at_ms.into());
        }
        let _ = writeln!(out, "{value}");
    }
    Ok(Some(out))
}

fn write_entry(out: &mut String, entry: &Entry) {
    match entry {
        Entry::Model { text, tool_calls, .. } => {
            let meta = entry.answer_meta(", ").unwrap_or_default();
            let _ = writeln!(out, "\n{} {meta}", entry.step_label());
            indented(out, text);
            for call in tool_calls {
                let _ = writeln!(out, "    -> {} {}", call.name, call.arguments);
            }
        }
        Entry::Tool {
            name,
            ok,
            exit_code,
            output,
            output_tail,
            output_chars,
            diff,
            ms,
            ..
        } => {
            let status = match (ok, exit_code) {
                (_, Some(code)) => format!("exit code {code}"),
                (true, None) => "ok".to_owned(),
                (false, None) => "error".to_owned(),
            };
            let _ = writeln!(
                out,
                "{} {name}: {status} ({ms} ms, {output_chars} characters)",
                entry.step_label()
            );
            match diff {
                Some(diff) => indented(out, diff),
                None => indented(out, output),
            }
            if let (None, Some(tail)) = (diff, output_tail) {
                let _ = writeln!(out, "    [… the middle of the output is left out …]");
                indented(out, tail);
            }
        }
        Entry::Note { text } => {
            let _ = writeln!(out, "\n== {text}");
        }
        Entry::Call { purpose, text, .. } => {
            let meta = entry.answer_meta(", ").unwrap_or_default();
            let _ = writeln!(out, "\n~ {purpose}: {meta}");
            indented(out, text);
        }
        Entry::Egress { .. } => {
            let _ = writeln!(out, "    [{}]", entry.egress_line().unwrap_or_default());
        }
        Entry::Image { source, .. } => {
            let _ = writeln!(out, "\n== {} ({source})", entry.image_line().unwrap_or_default());
        }
    }
}

/// `text` indented, cut after [`SHOWN_LINES`] lines.
fn indented(out: &mut String, text: &str) {
    let lines: Vec<&str> = text.lines().collect();
    for line in lines.iter().take(SHOWN_LINES) {
        let _ = writeln!(out, "    {line}");
    }
    if lines.len() > SHOWN_LINES {
        let _ = writeln!(out, "    [… {} more lines]", lines.len() - SHOWN_LINES);
    }
}
