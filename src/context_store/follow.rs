//! Keeping a store in step with its thread: new messages classified and
//! appended, an edited message re-read in its place, a deleted one taken
//! out (the old texts go to the log's audit, never to a prompt), and the
//! Evolving tier summarised only when its budget cannot hold it whole.

use super::log::ContextLog;
use super::{classify, Classification, Classifier, ContextStore, Incoming, StoredMessage};
use crate::llm::tokens::count_text;
use crate::llm::{ChatRequest, Message};
use futures_util::stream::{self, StreamExt};

/// Classifications run at once when a thread is read.
const PARALLEL_CLASSIFICATIONS: usize = 4;

/// One reading of an item's thread.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    /// The messages that may be heard, oldest first.
    pub incoming: Vec<Incoming>,
    /// Source prefixes this reading covers (`comment:<item>`, `body:<item>`):
    /// a stored message under one of them that is not read now is gone
    /// from the thread, or may no longer be heard.
    pub covers: Vec<String>,
}

/// What a reading changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Followed {
    pub added: usize,
    pub edited: usize,
    pub deleted: usize,
}

/// `source` is `prefix` itself or `prefix:` followed by more.
fn under(source: &str, prefix: &str) -> bool {
    source
        .strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(':'))
}

impl ContextStore {
    /// Classifies the messages not yet stored (in parallel) and appends
    /// them in the order given. Returns how many were new.
    pub async fn add_all(
        &mut self,
        log: &dyn ContextLog,
        classifier: Classifier<'_>,
        incoming: Vec<Incoming>,
    ) -> usize {
        self.follow(
            log,
            classifier,
            Reading {
                incoming,
                covers: Vec::new(),
            },
        )
        .await
        .added
    }

    /// Brings the store in step with `reading`: new messages appended,
    /// changed ones re-classified in their place, covered ones no longer
    /// read taken out.
    pub async fn follow(
        &mut self,
        log: &dyn ContextLog,
        classifier: Classifier<'_>,
        reading: Reading,
    ) -> Followed {
        let (to_classify, mut read_seqs) = self.match_stored(log, reading.incoming);
        let classified = classify_all(classifier, to_classify).await;
        let mut followed = Followed::default();
        for (seq, m, c) in classified {
            match seq.and_then(|seq| self.messages.iter().find(|s| s.seq == seq).cloned()) {
                Some(old) => {
                    let new = StoredMessage {
                        seq: old.seq,
                        source: m.source,
                        author: m.author,
                        voice: m.voice,
                        text: m.text,
                        classification: c,
                        summary: None,
                    };
                    tracing::info!(store = %self.key, source = %new.source, "a message was edited on the thread; re-read in its place");
                    log.revise(&self.key, &old, &new);
                    self.replace(new);
                    followed.edited += 1;
                }
                None => {
                    let seq = self.push(log, m, c).seq;
                    read_seqs.push(seq);
                    followed.added += 1;
                }
            }
        }
        followed.deleted = self.take_out_unread(log, &read_seqs, &reading.covers);
        followed
    }

    /// Matches the read messages (each source once) to the stored ones.
    /// Returns what needs classifying (with the seq it replaces, when
    /// edited) and the seqs that were read. A body stored under an older
    /// source is renamed in place, no call needed.
    fn match_stored(
        &mut self,
        log: &dyn ContextLog,
        incoming: Vec<Incoming>,
    ) -> (Vec<(Option<u64>, Incoming)>, Vec<u64>) {
        let mut seen = std::collections::HashSet::new();
        let mut to_classify: Vec<(Option<u64>, Incoming)> = Vec::new();
        let mut read_seqs = Vec::new();
        for m in incoming {
            if !seen.insert(m.source.clone()) {
                continue;
            }
            match self.stored_for(&m.source) {
                Some(stored) => {
                    read_seqs.push(stored.seq);
                    if stored.text != m.text {
                        to_classify.push((Some(stored.seq), m));
                    } else if stored.source != m.source {
                        // An older store's body source (with a digest): renamed, no call needed.
                        let renamed = StoredMessage {
                            source: m.source,
                            ..stored.clone()
                        };
                        log.save(&self.key, &renamed);
                        self.replace(renamed);
                    }
                }
                None => to_classify.push((None, m)),
            }
        }
        (to_classify, read_seqs)
    }

    /// Takes out the stored messages under `covers` that were not read:
    /// gone from the thread, or no longer heard. Returns how many.
    fn take_out_unread(&mut self, log: &dyn ContextLog, read_seqs: &[u64], covers: &[String]) -> usize {
        let gone: Vec<StoredMessage> = self
            .messages
            .iter()
            .filter(|m| !read_seqs.contains(&m.seq) && covers.iter().any(|p| under(&m.source, p)))
            .cloned()
            .collect();
        for old in &gone {
            tracing::info!(store = %self.key, source = %old.source, "a message is gone from the thread (or no longer heard); taken out of the store");
            log.delete(&self.key, old);
            self.messages.retain(|m| m.seq != old.seq);
        }
        gone.len()
    }

    /// The stored message `source` stands for: the same source, or for an
    /// item's body, a body stored under an older source with a digest.
    fn stored_for(&self, source: &str) -> Option<&StoredMessage> {
        self.messages.iter().find(|m| m.source == source).or_else(|| {
            source
                .starts_with("body:")
                .then(|| self.messages.iter().find(|m| under(&m.source, source)))
                .flatten()
        })
    }

    fn replace(&mut self, message: StoredMessage) {
        if let Some(slot) = self.messages.iter_mut().find(|m| m.seq == message.seq) {
            *slot = message;
        }
    }

    /// Summarises the oldest Evolving entries, one line each, until the
    /// tier fits `budget` tokens: below the budget every constraint is
    /// sent whole. A failed summary leaves the entry whole: over budget is
    /// better than a constraint lost.
    pub async fn fit_evolving(&mut self, log: &dyn ContextLog, classifier: Classifier<'_>, budget: u64) {
        loop {
            let evolving = self.evolving();
            let used: u64 = evolving
                .iter()
                .map(|m| count_text(&super::synthesis::evolving_line(m)))
                .sum();
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
            let request = summary_request(&classifier.prompts.summarize, &message.text);
            match classifier.ask(&request).await {
                Ok(text) if !text.trim().is_empty() => {
                    let line = text.trim().lines().map(str::trim).collect::<Vec<_>>().join(" ");
                    tracing::info!(store = %self.key, seq, "a constraint is summarised: the Evolving tier is over context.evolving_tokens");
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
}

fn summary_request(template: &str, text: &str) -> ChatRequest {
    ChatRequest {
        model: String::new(),
        system: String::new(),
        messages: vec![Message::User(crate::prompts::fill(template, &[("text", text)]))],
        tools: Vec::new(),
        max_output_tokens: 2_048,
        temperature: Some(classify::TEMPERATURE),
        // As little thought as the model allows: the answer is a summary.
        reasoning_effort: Some("none".into()),
        cache_system: false,
        json_output: false,
    }
}

/// Classifies the messages, a few at once, keeping their order.
async fn classify_all(
    classifier: Classifier<'_>,
    to_classify: Vec<(Option<u64>, Incoming)>,
) -> Vec<(Option<u64>, Incoming, Classification)> {
    stream::iter(to_classify)
        .map(|(seq, m)| async move {
            let c = classify::classify_metered(
                classifier.model,
                classifier.name,
                classifier.prompts,
                &m.text,
                classifier.usage,
            )
            .await;
            (seq, m, c)
        })
        .buffered(PARALLEL_CLASSIFICATIONS)
        .collect()
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_covers_its_own_sources_only() {
        assert!(under(
            "comment:github:a/b:issue:1:77",
            "comment:github:a/b:issue:1"
        ));
        assert!(under("body:github:a/b:issue:1", "body:github:a/b:issue:1"));
        assert!(under("body:github:a/b:issue:1:0a1b2c", "body:github:a/b:issue:1"));
        assert!(!under(
            "comment:github:a/b:issue:12:77",
            "comment:github:a/b:issue:1"
        ));
    }
}
