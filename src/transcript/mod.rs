//! The transcript of every run: each model answer (its text, the tool
//! calls it asked for, tokens, cost, time), each tool call with its
//! arguments and result (a command's exit code and the head and tail of
//! its output, an edit as a diff), and the run's start and end, journalled
//! as they happen. Every text in an entry is masked before the entry is
//! serialized (forgehand's own secrets by value, anyone's credentials by
//! format), a long output before its middle is left out, and a note after
//! the entry names the rules that masked something (never the value).
//! `forgehand tasks show ID` prints one, or exports it as JSON Lines; the
//! journal forgets them `daemon.transcript_retention` after their run ended.

mod entry;
mod live;
mod model;
mod page;
mod render;

pub use entry::{Call, Entry};
pub use live::{LiveEvent, LiveRuns};
pub use model::Recorder;
use page::entry_block;
pub use page::render_page;
pub use render::{render_jsonl, render_runs, render_text};

use crate::agent::{ModelTurn, StepRecorder};
use crate::config::Secrets;
use crate::journal::{Journal, JournalError, RunRecord};
use crate::llm::stream::StreamEvent;
use crate::llm::{ToolCall, ToolResult};
use crate::secrets::Masked;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One run's transcript, being written.
pub struct Transcript {
    journal: Arc<Journal>,
    secrets: Arc<Secrets>,
    run: i64,
    next: AtomicU64,
    /// Who follows the run live (the transcript page), if anyone may.
    live: Option<Arc<LiveRuns>>,
    streaming: Mutex<live::Streaming>,
}

impl Transcript {
    /// A new run of the task `key`, followed live through `live` when
    /// given; `None` (logged) when the journal cannot take it: the task
    /// goes on without a transcript.
    pub fn begin(
        journal: Arc<Journal>,
        secrets: Arc<Secrets>,
        key: &str,
        live: Option<Arc<LiveRuns>>,
    ) -> Option<Arc<Transcript>> {
        match journal.begin_run(key) {
            Ok(run) => {
                if let Some(live) = &live {
                    live.open(run);
                }
                Some(Arc::new(Transcript {
                    journal,
                    secrets,
                    run,
                    next: AtomicU64::new(0),
                    live,
                    streaming: Mutex::default(),
                }))
            }
            Err(e) => {
                tracing::warn!(task = key, "cannot start the run's transcript: {e}");
                None
            }
        }
    }

    /// The run's id (`forgehand tasks show ID`, `/tasks/ID`).
    pub fn id(&self) -> i64 {
        self.run
    }

    pub fn note(&self, text: impl Into<String>) {
        self.write(&Entry::Note { text: text.into() });
    }

    /// Records an image from the thread (see [`Entry::Image`]).
    pub fn image(&self, entry: Entry) {
        if matches!(entry, Entry::Image { .. }) {
            self.write(&entry);
        }
    }

    /// Writes the egress decisions of `egress` into the transcript: those
    /// made so far, then each as it is made.
    pub fn follow_egress(self: &Arc<Self>, egress: &crate::sandbox::egress::Egress) {
        let me = self.clone();
        let earlier = egress.observe(Arc::new(move |d| me.egress(d)));
        for decision in &earlier {
            self.egress(decision);
        }
    }

    fn egress(&self, decision: &crate::sandbox::egress::Decision) {
        self.write(&Entry::Egress {
            phase: decision.phase.clone(),
            host: decision.host.clone(),
            port: decision.port,
            denied: decision.denied.clone(),
            bytes: decision.bytes,
            credential: decision.credential.clone(),
        });
    }

    /// The run ended with `outcome`.
    pub fn end(&self, outcome: &str, detail: &str) {
        self.note(format!("ended: {outcome} {detail}").trim_end().to_owned());
        if let Err(e) = self.journal.end_run(self.run, outcome) {
            tracing::warn!(run = self.run, "cannot end the run's transcript: {e}");
        }
        if let Some(live) = &self.live {
            live.close(self.run);
        }
    }

    pub(super) fn write(&self, entry: &Entry) {
        self.write_masked(entry, BTreeSet::new());
    }

    /// `text` masked, for what is cut before it is written (a long output
    /// is folded after masking, so a token at the fold is still found).
    fn mask(&self, text: &str) -> Masked {
        self.secrets.mask(text)
    }

    /// Writes `entry` with every text in it masked as it is, before JSON
    /// escapes it; `masked`: the rules that masked parts of it already.
    /// A note after it names the rules.
    fn write_masked(&self, entry: &Entry, mut masked: BTreeSet<String>) {
        let json = serde_json::to_value(entry).and_then(|mut value| {
            mask_strings(&mut value, &self.secrets, &mut masked);
            serde_json::to_string(&value)
        });
        let json = match json {
            Ok(json) => json,
            Err(e) => {
                tracing::warn!(run = self.run, "cannot write a transcript entry: {e}");
                return;
            }
        };
        let note = (!masked.is_empty()).then(|| {
            let rules: Vec<&str> = masked.iter().map(String::as_str).collect();
            // Rule ids only: nothing in it to mask.
            serde_json::to_string(&Entry::Note {
                text: format!(
                    "masked in the entry above (by rule, never the value): {}",
                    rules.join(", ")
                ),
            })
        });
        let rows: Vec<String> = std::iter::once(json).chain(note.and_then(Result::ok)).collect();
        // The note's place is reserved with its entry's: it follows it whatever else is written.
        let first = self.next.fetch_add(rows.len() as u64, Ordering::SeqCst);
        let at = chrono::Utc::now().timestamp_millis();
        for (seq, row) in (first..).zip(&rows) {
            if let Err(e) = self.journal.append_entry(self.run, seq, at, row) {
                tracing::warn!(run = self.run, "cannot write a transcript entry: {e}");
            }
            self.publish_entry(seq, row);
        }
    }

    /// Tells the run's live readers of the entry journalled at `seq` (its
    /// masked JSON `row`), rendered as the page renders it.
    fn publish_entry(&self, seq: u64, row: &str) {
        let Some(live) = self.live.as_ref().filter(|l| l.followed(self.run)) else {
            return;
        };
        if let Ok(entry) = serde_json::from_str::<Entry>(row) {
            live.publish(self.run, LiveEvent::entry(seq, &entry));
        }
    }

    /// Tells the run's live readers `event`, masked, when someone follows.
    fn publish_masked(&self, event: impl FnOnce(&Self) -> Option<LiveEvent>) {
        if let Some(live) = self.live.as_ref().filter(|l| l.followed(self.run)) {
            if let Some(event) = event(self) {
                live.publish(self.run, event);
            }
        }
    }
}

impl Drop for Transcript {
    /// A run dropped without its end (a task cancelled mid-way): its live
    /// readers are let go all the same.
    fn drop(&mut self) {
        if let Some(live) = &self.live {
            live.close(self.run);
        }
    }
}

/// Masks every string in `value` (object keys are field names), adding
/// the rules that masked something to `masked`.
fn mask_strings(value: &mut serde_json::Value, secrets: &Secrets, masked: &mut BTreeSet<String>) {
    match value {
        serde_json::Value::String(text) => {
            let found = secrets.mask(text);
            if !found.rules.is_empty() {
                *text = found.text;
                masked.extend(found.rules);
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                mask_strings(item, secrets, masked);
            }
        }
        serde_json::Value::Object(fields) => {
            for item in fields.values_mut() {
                mask_strings(item, secrets, masked);
            }
        }
        _ => {}
    }
}

impl StepRecorder for Transcript {
    fn model_turn(&self, turn: &ModelTurn<'_>) {
        self.model_entry(turn, None);
    }

    fn tool_ran(&self, step: u32, call: &ToolCall, result: &ToolResult, took: Duration) {
        self.tool_entry(step, call, result, took, None);
    }

    fn streamed(&self, step: u32, event: &StreamEvent) {
        self.stream_text(step, event);
    }

    fn tool_started(&self, step: u32, call: &ToolCall) {
        self.tool_running(step, call);
    }

    fn heard(&self, step: u32, said: &str) {
        self.told(step, said, None);
    }

    fn resumed(&self, step: u32) {
        self.note(format!(
            "Resumed after step {step} from its checkpoint: the conversation and the sandbox's files as they were then"
        ));
    }
}

/// The steps of one of several attempts at the change, labelled with its
/// number in the run's transcript.
pub struct AttemptSteps {
    pub transcript: Arc<Transcript>,
    pub attempt: u32,
}

impl StepRecorder for AttemptSteps {
    fn model_turn(&self, turn: &ModelTurn<'_>) {
        self.transcript.model_entry(turn, Some(self.attempt));
    }

    fn tool_ran(&self, step: u32, call: &ToolCall, result: &ToolResult, took: Duration) {
        self.transcript
            .tool_entry(step, call, result, took, Some(self.attempt));
    }

    // The streaming text of attempts that run side by side would mix on
    // the live page: their entries show there as they are written.

    fn tool_started(&self, step: u32, call: &ToolCall) {
        self.transcript.tool_running(step, call);
    }

    fn heard(&self, step: u32, said: &str) {
        self.transcript.told(step, said, Some(self.attempt));
    }
}

impl Transcript {
    fn model_entry(&self, turn: &ModelTurn<'_>, attempt: Option<u32>) {
        self.write(&Entry::Model {
            step: turn.step,
            model: turn.model.to_owned(),
            text: turn.text.to_owned(),
            tool_calls: turn
                .tool_calls
                .iter()
                .map(|c| Call {
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                })
                .collect(),
            input_tokens: turn.usage.input_tokens,
            cached_input_tokens: turn.usage.cached_input_tokens,
            output_tokens: turn.usage.output_tokens,
            cost_usd: turn.cost,
            ms: turn.took.as_millis() as u64,
            attempt,
        });
    }

    fn tool_entry(
        &self,
        step: u32,
        call: &ToolCall,
        result: &ToolResult,
        took: Duration,
        attempt: Option<u32>,
    ) {
        let content = self.mask(&result.content);
        let (output, output_tail) = entry::fold(&content.text);
        let diff = match result.is_error {
            false => entry::edit_diff(&call.name, &call.arguments),
            true => None,
        };
        let entry = Entry::Tool {
            step,
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            ok: !result.is_error,
            exit_code: entry::exit_code(&result.content),
            output,
            output_tail,
            output_chars: result.content.chars().count(),
            diff,
            ms: took.as_millis() as u64,
            attempt,
        };
        self.write_masked(&entry, content.rules);
    }

    fn stream_text(&self, step: u32, event: &StreamEvent) {
        let mut streaming = self
            .streaming
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let text = match event {
            StreamEvent::Text(delta) => streaming.add(step, delta),
            StreamEvent::Restarted { .. } => {
                streaming.restart(step);
                Some(String::new())
            }
            _ => None,
        };
        drop(streaming);
        if let Some(text) = text {
            self.publish_masked(|me| {
                Some(LiveEvent::Text {
                    step,
                    text: me.mask(&text).text,
                })
            });
        }
    }

    fn told(&self, step: u32, said: &str, attempt: Option<u32>) {
        let of = attempt.map(|a| format!(" of attempt {a}")).unwrap_or_default();
        self.note(format!("told the agent before step {step}{of}: {said}"));
    }

    fn tool_running(&self, step: u32, call: &ToolCall) {
        self.publish_masked(|me| {
            Some(LiveEvent::ToolStarted {
                step,
                name: call.name.clone(),
                arguments: live::arguments_shown(&me.mask(&call.arguments).text),
            })
        });
    }
}

/// Run `id` and its entries in order; an entry that cannot be read (a
/// newer forgehand wrote it) stands as a note saying so. `None`: no such run.
pub fn load(journal: &Journal, id: i64) -> Result<Option<(RunRecord, Vec<Entry>)>, JournalError> {
    let Some(run) = journal.run_record(id)? else {
        return Ok(None);
    };
    let entries = journal
        .entries(id)?
        .into_iter()
        .map(|(_, json)| {
            serde_json::from_str(&json).unwrap_or_else(|e| Entry::Note {
                text: format!("(an entry that cannot be read: {e})"),
            })
        })
        .collect();
    Ok(Some((run, entries)))
}

/// Forgets the transcripts of runs that ended more than `retention` ago.
pub fn prune(journal: &Journal, retention: Duration) {
    let before = chrono::Utc::now().timestamp() - retention.as_secs() as i64;
    match journal.prune_runs(before) {
        Ok(0) => {}
        Ok(n) => {
            tracing::info!("forgot the transcripts of {n} run(s) older than daemon.transcript_retention")
        }
        Err(e) => tracing::warn!("cannot prune the transcripts: {e}"),
    }
}

#[cfg(test)]
mod tests;
