//! The hierarchical context store: every message of a
//! task's thread, classified, kept in three tiers and synthesised into the
//! synthesis template for every main request, so the goal and the constraints
//! travel with each one however long the run.
//!
//! - Core: the problem definition(s), raw.
//! - Evolving: constraints and refinements, whole; only when they grow
//!   past their token budget are the oldest summarised to one line each
//!   (never dropped; the prompt says a summary stands for a longer text).
//! - Turn: the latest few messages, raw.
//!
//! The store follows the thread as it is now ([`follow`]): an edited
//! message is re-read in its place and a deleted one leaves, their old
//! texts kept by the log for audit. A store is keyed by the conversation
//! (an issue and the PR/MR forgehand opened for it share one) and persisted
//! through [`ContextLog`] (the journal in the daemon), so a follow-up days
//! later continues it. Rendering is in [`synthesis`].

pub mod classify;
mod follow;
mod log;
pub mod synthesis;

pub use follow::{Followed, Reading};
pub use log::{ContextLog, MemoryLog, Retired};
pub use synthesis::{Current, Synthesis, TierBudgets};

use crate::llm::{ChatModel, ChatRequest};
use crate::prompts::ContextPrompts;
use classify::{Classification, Intent};
use serde::{Deserialize, Serialize};

/// Whose words a message is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Voice {
    /// Someone allowed to trigger tasks.
    Member,
    /// Someone without access, whose issue text a maintainer's label vouched for.
    Reporter { vouched_by: String },
}

/// One message as kept in the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredMessage {
    /// Order of arrival in the store, from 1.
    pub seq: u64,
    /// Where it came from (`body:…`, `comment:…`): a source is stored once.
    pub source: String,
    pub author: String,
    pub voice: Voice,
    /// The text as the model may see it.
    pub text: String,
    pub classification: Classification,
    /// The one-line summary that stands for it in the Evolving tier, once
    /// that tier outgrew its budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// A message on its way into the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incoming {
    pub source: String,
    pub author: String,
    pub voice: Voice,
    pub text: String,
}

/// Which model classifies and summarises.
#[derive(Clone, Copy)]
pub struct Classifier<'a> {
    pub model: &'a dyn ChatModel,
    /// A model by name (`context.classifier_model`); `None`: the router's choice.
    pub name: Option<&'a str>,
    /// Where the calls' tokens are added, if anywhere.
    pub usage: Option<&'a crate::llm::usage::Meter>,
    pub prompts: &'a ContextPrompts,
}

impl Classifier<'_> {
    async fn ask(&self, request: &ChatRequest) -> Result<String, crate::llm::LlmError> {
        let response = match self.name {
            Some(name) => self.model.chat_on(name, request).await?,
            None => self.model.chat(request).await?,
        };
        crate::llm::usage::record(self.usage, &response);
        Ok(response.text)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ContextStore {
    key: String,
    messages: Vec<StoredMessage>,
}

impl ContextStore {
    /// The store `key` as the log holds it (empty when new).
    pub fn load(log: &dyn ContextLog, key: &str) -> ContextStore {
        let mut messages = log.load(key);
        messages.sort_by_key(|m| m.seq);
        ContextStore {
            key: key.to_owned(),
            messages,
        }
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn messages(&self) -> &[StoredMessage] {
        &self.messages
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    pub fn contains(&self, source: &str) -> bool {
        self.messages.iter().any(|m| m.source == source)
    }

    /// Appends one classified message (and logs it).
    pub fn push(
        &mut self,
        log: &dyn ContextLog,
        incoming: Incoming,
        classification: Classification,
    ) -> &StoredMessage {
        if let Some(failure) = &classification.failure {
            tracing::info!(store = %self.key, source = %incoming.source, "message stored as UNCLEAR: {failure}");
        }
        let mut message = StoredMessage {
            seq: 0,
            source: incoming.source,
            author: incoming.author,
            voice: incoming.voice,
            text: incoming.text,
            classification,
            summary: None,
        };
        // The log numbers it: another run of this store may have added
        // messages since this one was loaded.
        let seq = log.append(&self.key, &message);
        message.seq = seq;
        let at = self.messages.partition_point(|m| m.seq < seq);
        self.messages.insert(at, message);
        &self.messages[at]
    }

    /// Core: the opening post (an issue's or PR/MR's own text, whatever it
    /// was classified as: a stack trace or a "how do I" is still the
    /// problem), then every other problem definition; without an opening
    /// post, the first message when none was classified a problem.
    pub fn core(&self) -> Vec<&StoredMessage> {
        let opening = self.messages.iter().find(|m| is_opening_post(m));
        let mut core: Vec<&StoredMessage> = opening.into_iter().collect();
        core.extend(self.messages.iter().filter(|m| {
            m.classification.has(Intent::ProblemDefinition) && opening.is_none_or(|o| o.seq != m.seq)
        }));
        if core.is_empty() {
            core.extend(self.messages.first());
        }
        core.sort_by_key(|m| m.seq);
        core
    }

    /// Evolving: constraints and refinements, oldest first (core messages
    /// excluded: their text is in the Mission already).
    pub fn evolving(&self) -> Vec<&StoredMessage> {
        let core: Vec<u64> = self.core().iter().map(|m| m.seq).collect();
        self.messages
            .iter()
            .filter(|m| {
                !core.contains(&m.seq)
                    && (m.classification.has(Intent::ConstraintAddition)
                        || m.classification.has(Intent::Refinement))
            })
            .collect()
    }

    /// The current request is open-ended: the newest message states a
    /// problem together with a question (for example: "I want X;
    /// is there a good way?"), so idea options are worth generating. Decided
    /// per request: a follow-up that only refines does not bring them back.
    pub fn open_ended(&self) -> bool {
        self.messages.last().is_some_and(|m| {
            m.classification.has(Intent::ProblemDefinition) && m.classification.has(Intent::Question)
        })
    }
}

/// The item's own text (its title and body), as the task stores it.
pub(crate) fn is_opening_post(m: &StoredMessage) -> bool {
    m.source.starts_with("body:")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(seq: u64, text: &str, intents: &[Intent]) -> StoredMessage {
        StoredMessage {
            seq,
            source: format!("comment:{seq}"),
            author: "bob".into(),
            voice: Voice::Member,
            text: text.into(),
            classification: Classification {
                intents: intents.to_vec(),
                reason: String::new(),
                failure: None,
            },
            summary: None,
        }
    }

    #[test]
    fn the_template_has_the_tiers_in_place() {
        let store = ContextStore {
            key: "k".into(),
            messages: vec![
                message(1, "Add CSV export", &[Intent::ProblemDefinition]),
                message(2, "No new dependencies", &[Intent::ConstraintAddition]),
                message(3, "What about JSON?", &[Intent::Question]),
                message(4, "Use semicolons", &[Intent::Refinement]),
            ],
        };
        let text = store.synthesize(&Synthesis::new(
            &crate::prompts::Prompts::embedded().context.synthesis,
            3,
        ));
        let mission = text.find("# Mission").unwrap();
        let constraints = text.find("# Constraints").unwrap();
        let recent = text.find("# Recent Conversation").unwrap();
        let current = text.find("# User's Current Message").unwrap();
        assert!(mission < constraints && constraints < recent && recent < current);
        assert!(text[mission..constraints].contains("Add CSV export"));
        assert!(text[constraints..recent].contains("- No new dependencies (@bob)"));
        assert!(text[constraints..recent].contains("- Use semicolons"));
        assert!(text[recent..current].contains("What about JSON?"));
        assert!(!text[recent..current].contains("Add CSV export"));
        assert!(text[current..].contains("Use semicolons"));
        assert!(!store.open_ended());
    }

    #[test]
    fn the_opening_post_stays_in_the_mission_whatever_it_was_classified() {
        let mut body = message(
            1,
            "panic at src/lib.rs:4: how do I fix this?",
            &[Intent::Question],
        );
        body.source = "body:github:a/b:issue:1:abc".into();
        let mut messages = vec![
            body,
            message(
                2,
                "The parser must accept empty lines",
                &[Intent::ProblemDefinition],
            ),
        ];
        for n in 3..8 {
            messages.push(message(n, &format!("chatter {n}"), &[Intent::Unclear]));
        }
        let store = ContextStore {
            key: "k".into(),
            messages,
        };
        let core: Vec<u64> = store.core().iter().map(|m| m.seq).collect();
        assert_eq!(core, vec![1, 2]);
        let text = store.synthesize(&Synthesis::new(
            &crate::prompts::Prompts::embedded().context.synthesis,
            3,
        ));
        let mission = &text[text.find("# Mission").unwrap()..text.find("# Constraints").unwrap()];
        assert!(
            mission.contains("panic at src/lib.rs:4") && mission.contains("accept empty lines"),
            "{mission}"
        );
    }

    #[test]
    fn open_ended_is_decided_by_the_current_request() {
        let open = [Intent::ProblemDefinition, Intent::Question];
        let mut store = ContextStore {
            key: "k".into(),
            messages: vec![message(1, "I want X; is there a good way?", &open)],
        };
        assert!(store.open_ended());
        store
            .messages
            .push(message(2, "Use semicolons", &[Intent::Refinement]));
        assert!(
            !store.open_ended(),
            "a refining follow-up brings no idea options back"
        );
    }
}
