//! The hierarchical context store (seed 003 §4.2-4.3): every message of a
//! task's thread, classified, kept in three tiers and synthesised into the
//! seed's template for every main request, so the goal and the constraints
//! travel with each one however long the run.
//!
//! - Core: the problem definition(s), raw.
//! - Evolving: constraints and refinements; when they grow past a token
//!   budget the oldest are summarised to one line each (never dropped; the
//!   raw text stays in the log).
//! - Turn: the latest few messages, raw.
//!
//! A store is keyed by the conversation (an issue and the PR/MR forgehand
//! opened for it share one) and persisted through [`ContextLog`] (the
//! journal in the daemon), so a follow-up days later continues it.

use super::classify::{self, Classification, Intent};
use crate::llm::tokens::count_text;
use crate::llm::{ChatModel, ChatRequest, Message};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Mutex;

const SYNTHESIS: &str = include_str!("../../prompts/context/synthesis.txt");
const SUMMARIZE: &str = include_str!("../../prompts/context/summarize.txt");

/// Classifications run at once when a thread is read.
const PARALLEL_CLASSIFICATIONS: usize = 4;

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

/// Where stores are kept between runs.
pub trait ContextLog: Send + Sync {
    fn load(&self, store: &str) -> Vec<StoredMessage>;
    /// Writes `message`, replacing the one of the same `seq` if there is one.
    fn save(&self, store: &str, message: &StoredMessage);
    /// Adds a new message and returns the `seq` the log gave it: the next
    /// one of the store as the log holds it now, so two runs of one store
    /// (an issue and its PR/MR at once) never write the same number. A
    /// message whose source the store holds already keeps its number.
    fn append(&self, store: &str, message: &StoredMessage) -> u64;
}

/// Stores in memory (the MCP server's sessions, tests).
#[derive(Default)]
pub struct MemoryLog {
    stores: Mutex<HashMap<String, Vec<StoredMessage>>>,
}

impl ContextLog for MemoryLog {
    fn load(&self, store: &str) -> Vec<StoredMessage> {
        let stores = self.stores.lock().unwrap_or_else(|p| p.into_inner());
        stores.get(store).cloned().unwrap_or_default()
    }

    fn save(&self, store: &str, message: &StoredMessage) {
        let mut stores = self.stores.lock().unwrap_or_else(|p| p.into_inner());
        let messages = stores.entry(store.to_owned()).or_default();
        match messages.iter_mut().find(|m| m.seq == message.seq) {
            Some(old) => *old = message.clone(),
            None => messages.push(message.clone()),
        }
    }

    fn append(&self, store: &str, message: &StoredMessage) -> u64 {
        let mut stores = self.stores.lock().unwrap_or_else(|p| p.into_inner());
        let messages = stores.entry(store.to_owned()).or_default();
        if let Some(same) = messages.iter().find(|m| m.source == message.source) {
            return same.seq;
        }
        let seq = messages.iter().map(|m| m.seq).max().unwrap_or(0) + 1;
        messages.push(StoredMessage {
            seq,
            ..message.clone()
        });
        seq
    }
}

/// Which model classifies and summarises.
#[derive(Clone, Copy)]
pub struct Classifier<'a> {
    pub model: &'a dyn ChatModel,
    /// A model by name (`context.classifier_model`); `None`: the router's choice.
    pub name: Option<&'a str>,
    /// Where the calls' tokens are added, if anywhere.
    pub usage: Option<&'a crate::llm::usage::Meter>,
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

    /// Classifies the messages not yet stored (in parallel) and appends
    /// them in the order given. Returns how many were new.
    pub async fn add_all(
        &mut self,
        log: &dyn ContextLog,
        classifier: Classifier<'_>,
        incoming: Vec<Incoming>,
    ) -> usize {
        use futures_util::stream::{self, StreamExt};
        let mut seen = std::collections::HashSet::new();
        let new: Vec<Incoming> = incoming
            .into_iter()
            .filter(|m| !self.contains(&m.source) && seen.insert(m.source.clone()))
            .collect();
        let classified: Vec<(Incoming, Classification)> = stream::iter(new)
            .map(|m| async move {
                let c =
                    classify::classify_metered(classifier.model, classifier.name, &m.text, classifier.usage)
                        .await;
                (m, c)
            })
            .buffered(PARALLEL_CLASSIFICATIONS)
            .collect()
            .await;
        let count = classified.len();
        for (m, c) in classified {
            self.push(log, m, c);
        }
        count
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
    /// problem together with a question (the seed's own example: "I want X;
    /// is there a good way?"), so idea options are worth generating. Decided
    /// per request: a follow-up that only refines does not bring them back.
    pub fn open_ended(&self) -> bool {
        self.messages.last().is_some_and(|m| {
            m.classification.has(Intent::ProblemDefinition) && m.classification.has(Intent::Question)
        })
    }

    /// Summarises the oldest Evolving entries, one line each, until the
    /// tier fits `budget` tokens. A failed summary leaves the entry whole:
    /// over budget is better than a constraint lost.
    pub async fn fit_evolving(&mut self, log: &dyn ContextLog, classifier: Classifier<'_>, budget: u64) {
        loop {
            let evolving = self.evolving();
            let used: u64 = evolving.iter().map(|m| count_text(&evolving_line(m))).sum();
            if used <= budget {
                return;
            }
            let Some(seq) = evolving.iter().find(|m| m.summary.is_none()).map(|m| m.seq) else {
                tracing::warn!(store = %self.key, used, budget, "the constraints take more than context.evolving_tokens even summarised; keeping them all");
                return;
            };
            let Some(message) = self.messages.iter_mut().find(|m| m.seq == seq) else {
                return;
            };
            let request = summary_request(&message.text);
            match classifier.ask(&request).await {
                Ok(text) if !text.trim().is_empty() => {
                    let line = text.trim().lines().map(str::trim).collect::<Vec<_>>().join(" ");
                    message.summary = Some(line);
                    log.save(&self.key, message);
                }
                Ok(_) | Err(_) => {
                    tracing::warn!(store = %self.key, seq, "cannot summarise a constraint; it stays whole");
                    return;
                }
            }
        }
    }

    /// The seed's template: Mission (Core), Constraints (Evolving), Recent
    /// Conversation (the `recent_turns` messages before the current one)
    /// and the User's Current Message (the newest; when that is the
    /// problem itself, a line that says the Mission is the request).
    pub fn synthesize(&self, recent_turns: usize) -> String {
        // The newest message is the current one; the Mission holds the
        // problem definitions before it (the first message when none was
        // classified so). A store of one message shows it as the Mission.
        let newest = self.messages.last();
        let alone = self.messages.len() == 1;
        let mut core = self.core();
        if !alone {
            core.retain(|m| newest.is_none_or(|n| n.seq != m.seq));
            if core.is_empty() {
                core.extend(self.messages.first());
            }
        }
        let core_seqs: Vec<u64> = core.iter().map(|m| m.seq).collect();
        let mission = if core.is_empty() {
            "(no problem has been stated yet)".to_owned()
        } else {
            core.iter().map(|m| render(m)).collect::<Vec<_>>().join("\n\n")
        };
        let evolving: Vec<&StoredMessage> = self
            .evolving()
            .into_iter()
            .filter(|m| !core_seqs.contains(&m.seq))
            .collect();
        let constraints = if evolving.is_empty() {
            "- (none so far)".to_owned()
        } else {
            evolving
                .iter()
                .map(|m| evolving_line(m))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let current = match newest {
            Some(_) if alone => "(The problem stated in the Mission is the request.)".to_owned(),
            Some(m) => render(m),
            None => "(no message yet)".to_owned(),
        };
        let before = &self.messages[..self.messages.len().saturating_sub(1)];
        let recent: Vec<String> = before
            .iter()
            .filter(|m| !core_seqs.contains(&m.seq))
            .rev()
            .take(recent_turns)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .map(render)
            .collect();
        let recent = if recent.is_empty() {
            "(none)".to_owned()
        } else {
            recent.join("\n\n")
        };
        super::prompts::fill(
            SYNTHESIS,
            &[
                ("core", mission.as_str()),
                ("constraints", constraints.as_str()),
                ("recent", recent.as_str()),
                ("current", current.as_str()),
            ],
        )
    }
}

/// The item's own text (its title and body), as the task stores it.
fn is_opening_post(m: &StoredMessage) -> bool {
    m.source.starts_with("body:")
}

/// A message with its author, and the reporter's mark where it applies.
fn render(m: &StoredMessage) -> String {
    let who = match &m.voice {
        Voice::Member => format!("@{}", m.author),
        Voice::Reporter { vouched_by } => format!(
            "@{} (the reporter's words, not a maintainer's; @{vouched_by}'s label vouches for them as they stood when labelled)",
            m.author
        ),
    };
    format!("{who}:\n{}", m.text.trim())
}

/// One Evolving entry: its summary once it has one, else its whole text.
fn evolving_line(m: &StoredMessage) -> String {
    match &m.summary {
        Some(summary) => format!("- {summary} (summarised; from @{})", m.author),
        None => {
            let text = m.text.trim().replace('\n', "\n  ");
            format!("- {text} (@{})", m.author)
        }
    }
}

fn summary_request(text: &str) -> ChatRequest {
    ChatRequest {
        model: String::new(),
        system: String::new(),
        messages: vec![Message::User(super::prompts::fill(SUMMARIZE, &[("text", text)]))],
        tools: Vec::new(),
        max_output_tokens: 2_048,
        temperature: Some(classify::TEMPERATURE),
        reasoning_effort: Some("low".into()),
        cache_system: false,
        json_output: false,
    }
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
        let text = store.synthesize(3);
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
        let text = store.synthesize(3);
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
