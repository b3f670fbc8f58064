//! Runs in flight as they happen, for the live transcript page
//! (`/tasks/ID/events`): each entry as it is journalled (rendered as the
//! page renders it), the model's text as it streams, each tool call as it
//! starts. Nothing here is kept: a reader who connects late reads the
//! journal first, then follows. Every text is masked before it is sent,
//! as the journalled entries are.

use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::broadcast;

/// Events a slow reader may fall behind by before it is told to reload.
const BACKLOG: usize = 1_024;

/// The model's text is sent again at most this often while it streams (the
/// whole text so far each time, so a reader that missed one misses nothing).
const TEXT_EVERY: Duration = Duration::from_millis(50);

/// Tool arguments shown while the tool runs are cut to this many characters.
const ARGUMENTS_SHOWN: usize = 300;

/// What a live reader is told.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LiveEvent {
    /// An entry (of the kind `of`: `model`, `tool`, ...) was journalled at
    /// `seq`: `html` is its block on the page; `in_step`: it belongs in the
    /// body of the step before it (a tool result, an egress decision), when
    /// a step is open.
    Entry {
        seq: u64,
        of: &'static str,
        html: String,
        in_step: bool,
    },
    /// The model's text in step `step` so far (up to its last whole word),
    /// while it streams; empty when the answer started again.
    Text { step: u32, text: String },
    /// A tool call of step `step` started running.
    ToolStarted {
        step: u32,
        name: String,
        arguments: String,
    },
    /// The run ended.
    Ended,
}

impl LiveEvent {
    /// `entry`, journalled at `seq`, as its readers get it: rendered as
    /// the page renders it.
    pub fn entry(seq: u64, entry: &super::Entry) -> LiveEvent {
        let (html, in_step) = super::entry_block(entry);
        LiveEvent::Entry {
            seq,
            of: kind_of(entry),
            html,
            in_step,
        }
    }
}

/// The runs in flight and who follows them: one per daemon, shared by
/// the tasks (which publish) and the HTTP listener (which follows).
#[derive(Default)]
pub struct LiveRuns {
    runs: Mutex<HashMap<i64, broadcast::Sender<Arc<LiveEvent>>>>,
}

impl LiveRuns {
    /// Run `run` begins: readers may follow it from now on.
    pub fn open(&self, run: i64) {
        let (sender, _) = broadcast::channel(BACKLOG);
        self.lock().insert(run, sender);
    }

    /// Follows `run`; `None` when it is not in flight (it ended, or it ran
    /// in another process).
    pub fn follow(&self, run: i64) -> Option<broadcast::Receiver<Arc<LiveEvent>>> {
        self.lock().get(&run).map(broadcast::Sender::subscribe)
    }

    /// Whether anyone follows `run` (what to publish costs work to make).
    pub fn followed(&self, run: i64) -> bool {
        self.lock().get(&run).is_some_and(|s| s.receiver_count() > 0)
    }

    pub fn publish(&self, run: i64, event: LiveEvent) {
        if let Some(sender) = self.lock().get(&run) {
            // No reader is not an error: the page may not be open.
            let _ = sender.send(Arc::new(event));
        }
    }

    /// Run `run` ended: its readers are told, then let go.
    pub fn close(&self, run: i64) {
        if let Some(sender) = self.lock().remove(&run) {
            let _ = sender.send(Arc::new(LiveEvent::Ended));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i64, broadcast::Sender<Arc<LiveEvent>>>> {
        // A panic while holding the map leaves it whole: take it back.
        self.runs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The text of the answer streaming now, and when it was last sent.
#[derive(Default)]
pub(super) struct Streaming {
    step: u32,
    text: String,
    sent: Option<Instant>,
}

impl Streaming {
    /// Adds `delta` to step `step`'s text; the text to send now (up to its
    /// last whole word: a secret half-streamed is not yet recognisable),
    /// unless one was sent less than [`TEXT_EVERY`] ago and `delta` ends
    /// no line.
    pub(super) fn add(&mut self, step: u32, delta: &str) -> Option<String> {
        if step != self.step {
            *self = Streaming {
                step,
                ..Streaming::default()
            };
        }
        self.text.push_str(delta);
        let due = self.sent.is_none_or(|at| at.elapsed() >= TEXT_EVERY) || delta.contains('\n');
        let whole_words = self.text.rfind(char::is_whitespace)?;
        if !due {
            return None;
        }
        self.sent = Some(Instant::now());
        Some(self.text[..whole_words].to_owned())
    }

    /// The answer starts again (a stream cut and retried): forget it.
    pub(super) fn restart(&mut self, step: u32) {
        *self = Streaming {
            step,
            ..Streaming::default()
        };
    }
}

/// The kind of `entry`, as its JSON names it.
fn kind_of(entry: &super::Entry) -> &'static str {
    use super::Entry;
    match entry {
        Entry::Model { .. } => "model",
        Entry::Tool { .. } => "tool",
        Entry::Call { .. } => "call",
        Entry::Egress { .. } => "egress",
        Entry::Note { .. } => "note",
        Entry::Image { .. } => "image",
    }
}

/// A tool call's arguments as shown while it runs: cut when long.
pub(super) fn arguments_shown(arguments: &str) -> String {
    match arguments.char_indices().nth(ARGUMENTS_SHOWN) {
        Some((at, _)) => format!("{}…", &arguments[..at]),
        None => arguments.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn readers_hear_a_runs_events_in_order_and_its_end() {
        let live = LiveRuns::default();
        assert!(live.follow(3).is_none(), "not in flight");
        live.open(3);
        let mut reader = live.follow(3).unwrap();
        assert!(live.followed(3));
        live.publish(
            3,
            LiveEvent::Text {
                step: 1,
                text: "Reading".into(),
            },
        );
        live.publish(4, LiveEvent::Ended);
        live.close(3);
        assert_eq!(
            *reader.recv().await.unwrap(),
            LiveEvent::Text {
                step: 1,
                text: "Reading".into()
            }
        );
        assert_eq!(*reader.recv().await.unwrap(), LiveEvent::Ended);
        assert!(reader.recv().await.is_err(), "let go after the end");
        assert!(live.follow(3).is_none());
    }

    #[test]
    fn streamed_text_is_sent_up_to_its_last_whole_word() {
        let mut streaming = Streaming::default();
        assert_eq!(streaming.add(1, "ghp_abc"), None, "no whole word yet");
        assert_eq!(streaming.add(1, "def is "), Some("ghp_abcdef is".into()));
        // Within the pause, only a line's end sends again.
        assert_eq!(streaming.add(1, "the token"), None);
        assert_eq!(streaming.add(1, ".\n"), Some("ghp_abcdef is the token.".into()));
        // A new step starts afresh; a restart forgets.
        assert_eq!(streaming.add(2, "Next "), Some("Next".into()));
        streaming.restart(2);
        std::thread::sleep(TEXT_EVERY);
        assert_eq!(streaming.add(2, "Again "), Some("Again".into()));
    }

    #[test]
    fn long_arguments_are_cut() {
        assert_eq!(arguments_shown("{}"), "{}");
        let long = "é".repeat(ARGUMENTS_SHOWN + 5);
        assert_eq!(arguments_shown(&long).chars().count(), ARGUMENTS_SHOWN + 1);
    }
}
