//! The task's context store: the thread's messages that may be heard,
//! classified into the store of the conversation. An issue and the PR/MR
//! forgehand opened for it (branch `<prefix>issue-N`) share one store, so
//! a follow-up on the PR/MR, days later and after restarts, starts with the
//! first request's problem and constraints. When nothing of the request
//! may be heard, no model is called.

use super::*;
use crate::llm::usage::Meter;
use crate::planning::context::{Classifier, ContextLog, ContextStore, Reading, StoredMessage, Voice};

/// The store of the conversation `item` belongs to.
pub(super) fn conversation_key(item: &ItemRef, branch: &str, branch_prefix: &str) -> String {
    if item.kind == ItemKind::Change {
        let issue = branch
            .strip_prefix(branch_prefix)
            .and_then(|rest| rest.strip_prefix("issue-"))
            .and_then(|n| n.parse::<u64>().ok());
        if let Some(number) = issue {
            return ItemRef {
                kind: ItemKind::Issue,
                number,
                ..item.clone()
            }
            .key();
        }
    }
    item.key()
}

impl TaskRun<'_> {
    /// Loads the conversation's store and adds the thread's new messages.
    /// Returns it with lines for the progress comment.
    pub(super) async fn gather_context(
        &self,
        item: &Item,
        target: &Target,
        thread: &Thread,
        withheld: &[String],
    ) -> Result<(ContextStore, Vec<String>, UsageReport), TaskError> {
        let config = &self.env.config;
        let key = conversation_key(&self.item, &target.branch, &config.delivery.branch_prefix);
        let continued = key != self.item.key();
        let log: &dyn ContextLog = self.env.journal.as_ref();
        let mut store = ContextStore::load(log, &key);
        let earlier = store.messages().len();
        let with_item_text = !continued;
        let incoming = request::messages(item, &thread.author, &thread.comments, with_item_text);
        let body_read = with_item_text && !matches!(thread.author, Heard::Withheld { .. });
        let mut notes = withheld.to_vec();
        if store.is_empty() && incoming.is_empty() {
            return Err(TaskError::NothingHeard(notes.join("; ")));
        }
        let meter = Meter::new(UsageReport::new(crate::llm::router::price_table(&config.llm)));
        // context.classifier_model, else the cheapest usable light model
        // (`role: light`), else the cheapest usable one: a classification
        // is a short call that needs no large model.
        let light = config.context.classifier_model.clone().or_else(|| {
            crate::llm::usage::light_model(
                &self.env.model.models(),
                &config.planning.light_models,
                &crate::llm::router::price_table(&config.llm),
            )
        });
        let classifier = Classifier {
            model: self.env.model.as_ref(),
            name: light.as_deref(),
            usage: Some(&meter),
            prompts: &self.env.prompts.context,
        };
        let reading = Reading {
            incoming,
            covers: request::covered_sources(&self.item.key(), body_read),
        };
        let followed = store.follow(log, classifier, reading).await;
        store
            .fit_evolving(log, classifier, config.context.evolving_tokens)
            .await;
        if continued && earlier > 0 {
            let from = ItemRef::parse_key(&key)
                .map(|r| issue_ref(&r))
                .unwrap_or(key.clone());
            notes.push(format!(
                "Continuing the conversation of {from}: {earlier} earlier message(s) with its goal and constraints"
            ));
        }
        let unclear = store
            .messages()
            .iter()
            .filter(|m| m.classification.failure.is_some())
            .count();
        let mut line = format!("Context: {} new message(s) classified", followed.added);
        if followed.edited > 0 {
            line.push_str(&format!(
                "; {} edited on the thread, re-read in place",
                followed.edited
            ));
        }
        if followed.deleted > 0 {
            line.push_str(&format!(
                "; {} gone from the thread, left out (the old texts stay in the journal)",
                followed.deleted
            ));
        }
        if unclear > 0 {
            line.push_str(&format!(
                "; {unclear} could not be classified and are kept as UNCLEAR"
            ));
        }
        notes.push(line);
        notes.push(constraints_line(&store.evolving()));
        let usage = meter.into_inner().unwrap_or_else(|p| p.into_inner());
        Ok((store, notes, usage))
    }
}

/// Which messages the requests carry as constraints, quoted briefly.
fn constraints_line(evolving: &[&StoredMessage]) -> String {
    const SHOWN: usize = 5;
    if evolving.is_empty() {
        return "Constraints: none so far".to_owned();
    }
    let quoted: Vec<String> = evolving
        .iter()
        .take(SHOWN)
        .map(|m| {
            let text = m.summary.as_deref().unwrap_or(&m.text);
            // One line; no mention pings anyone again, no markup opens.
            let first = text
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .replace('@', "@\u{2060}")
                .replace('<', "‹")
                .replace('`', "'");
            let mut quote: String = first.chars().take(70).collect();
            if quote.len() < first.len() {
                quote.push('…');
            }
            // Names without "@": the comment is edited often, a mention would ping each time.
            let who = match &m.voice {
                Voice::Member => m.author.clone(),
                Voice::Reporter { .. } => format!("{}, the reporter", m.author),
            };
            format!("“{quote}” ({who})")
        })
        .collect();
    let mut line = format!("Constraints: {}", quoted.join("; "));
    if evolving.len() > SHOWN {
        line.push_str(&format!("; and {} more", evolving.len() - SHOWN));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pr_on_an_issue_branch_continues_the_issue() {
        let pr = ItemRef {
            forge: ForgeKind::GitHub,
            repo: "acme/api".into(),
            kind: ItemKind::Change,
            number: 9,
        };
        assert_eq!(
            conversation_key(&pr, "forgehand/issue-4", "forgehand/"),
            "github:acme/api:issue:4"
        );
        assert_eq!(conversation_key(&pr, "feature/x", "forgehand/"), pr.key());
        let issue = ItemRef {
            kind: ItemKind::Issue,
            ..pr.clone()
        };
        assert_eq!(
            conversation_key(&issue, "forgehand/issue-4", "forgehand/"),
            issue.key()
        );
    }
}
