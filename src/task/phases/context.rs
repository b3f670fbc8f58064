//! The task's context store: the thread's messages that may be heard,
//! classified into the store of the conversation. An issue and the PR/MR
//! forgehand opened for it (branch `<prefix>issue-N`) share one store, so
//! a follow-up on the PR/MR, days later and after restarts, starts with the
//! first request's problem and constraints. When nothing of the request
//! may be heard, no model is called.

use crate::agent::ChatModel;
use crate::config::ContextConfig;
use crate::context_store::classify::Intent;
use crate::context_store::{Classifier, ContextLog, ContextStore, Followed, Reading, StoredMessage, Voice};
use crate::forge::{ItemKind, ItemRef};
use crate::llm::usage::{Meter, Price, UsageReport};
use crate::prompts::Prompts;
use crate::task::handoff::Claimed;
use crate::task::handoff::Conversation;
use crate::task::item_ref::issue_ref;
use crate::task::phases::request::{self, Heard};
use crate::task::run::TaskRun;
use crate::task::state::error::TaskError;
use std::collections::BTreeMap;

/// What reading the conversation needs besides the run.
pub(in crate::task) struct Needs<'a> {
    pub context: &'a ContextConfig,
    /// `planning.light_models`: the classifier's model when
    /// `context.classifier_model` names none.
    pub light_models: &'a [String],
    /// `delivery.branch_prefix`: a PR on `<prefix>issue-N` continues issue N.
    pub branch_prefix: &'a str,
    pub prices: BTreeMap<String, Price>,
    pub model: &'a dyn ChatModel,
    pub prompts: &'a Prompts,
}

/// The store of the conversation `item` belongs to.
pub(in crate::task) fn conversation_key(item: &ItemRef, branch: &str, branch_prefix: &str) -> String {
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

/// Loads the conversation's store and adds the thread's new messages.
pub(in crate::task) async fn read_conversation(
    run: &TaskRun<'_>,
    needs: &Needs<'_>,
    claimed: &Claimed,
) -> Result<Conversation, TaskError> {
    let config = needs.context;
    let (item, thread) = (&claimed.item, &claimed.thread);
    let key = conversation_key(&run.item, &claimed.target.branch, needs.branch_prefix);
    let continued = key != run.item.key();
    let log: &dyn ContextLog = run.journal;
    let mut store = ContextStore::load(log, &key);
    let earlier = store.messages().len();
    let with_item_text = !continued;
    let incoming = request::messages(item, &thread.author, &thread.comments, with_item_text);
    let body_read = with_item_text && !matches!(thread.author, Heard::Withheld { .. });
    let mut notes = claimed.withheld.clone();
    if store.is_empty() && incoming.is_empty() {
        return Err(TaskError::NothingHeard(notes.join("; ")));
    }
    let meter = Meter::new(UsageReport::new(needs.prices.clone()));
    // context.classifier_model, else the cheapest usable light model
    // (`role: light`), else the cheapest usable one: a classification
    // is a short call that needs no large model.
    let light = config
        .classifier_model
        .clone()
        .or_else(|| crate::llm::usage::light_model(&needs.model.models(), needs.light_models, &needs.prices));
    let classifier = Classifier {
        model: needs.model,
        name: light.as_deref(),
        usage: Some(&meter),
        prompts: &needs.prompts.context,
    };
    let reading = Reading {
        incoming,
        covers: request::covered_sources(&run.item.key(), body_read),
    };
    let followed = store.follow(log, classifier, reading).await;
    // New messages are appended after the earlier ones.
    let new_problem = store
        .messages()
        .iter()
        .skip(earlier)
        .any(|m| m.classification.has(Intent::ProblemDefinition));
    let follow_up = run.item.kind == ItemKind::Change
        && claimed.target.branch.starts_with(needs.branch_prefix)
        && earlier > 0;
    store.fit_evolving(log, classifier, config.evolving_tokens).await;
    if continued && earlier > 0 {
        let from = ItemRef::parse_key(&key)
            .map(|r| issue_ref(&r))
            .unwrap_or(key.clone());
        notes.push(format!(
            "Continuing the conversation of {from}: {earlier} earlier message(s) with its goal and constraints"
        ));
    }
    notes.push(context_line(&store, followed));
    notes.push(constraints_line(&store.evolving()));
    let usage = meter.into_inner().unwrap_or_else(|p| p.into_inner());
    Ok(Conversation {
        store,
        notes,
        usage,
        follow_up,
        new_problem,
    })
}

/// The progress comment's line on what this reading changed.
fn context_line(store: &ContextStore, followed: Followed) -> String {
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
    line
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
    use crate::forge::ForgeKind;

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
