//! The synthesis template: Mission (Core),
//! Constraints (Evolving), Recent Conversation and the User's Current
//! Message, each tier within its own token budget so a large thread never
//! outgrows a model's window. What does not fit is cut with a line that
//! says so (the full text stays on the thread); constraints are never cut,
//! only summarised (see `fit_evolving`).

use super::{ContextStore, Intent, StoredMessage, Voice};
use crate::llm::tokens::count_text;

/// A message cut shorter than this is left out instead.
const SMALLEST_CUT: u64 = 200;

/// Tokens each tier may take (Constraints: `context.evolving_tokens`,
/// enforced when the store is read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TierBudgets {
    pub mission: u64,
    pub recent: u64,
    pub current: u64,
}

impl Default for TierBudgets {
    fn default() -> Self {
        TierBudgets {
            mission: 12_000,
            recent: 6_000,
            current: 8_000,
        }
    }
}

/// Which message is the User's Current Message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Current {
    /// The newest, whatever it says (a chat; a PR/MR, where the newest
    /// message is the request).
    Newest,
    /// The newest when it asks for something (a problem, a constraint, a
    /// refinement); chatter and questions stay in the Recent Conversation
    /// and the Mission with its Constraints are the request (an issue).
    NewestRequest,
}

/// How a store is rendered.
#[derive(Debug, Clone, Copy)]
pub struct Synthesis<'a> {
    pub template: &'a str,
    pub recent_turns: usize,
    pub budgets: TierBudgets,
    pub current: Current,
}

impl<'a> Synthesis<'a> {
    pub fn new(template: &'a str, recent_turns: usize) -> Synthesis<'a> {
        Synthesis {
            template,
            recent_turns,
            budgets: TierBudgets::default(),
            current: Current::Newest,
        }
    }
}

fn asks_for_something(m: &StoredMessage) -> bool {
    [
        Intent::ProblemDefinition,
        Intent::ConstraintAddition,
        Intent::Refinement,
    ]
    .iter()
    .any(|i| m.classification.has(*i))
}

impl ContextStore {
    /// The template filled from the store. The newest message is the
    /// current one (see [`Current`]); the Mission holds the problem
    /// definitions before it. A store of one message shows it as the
    /// Mission.
    pub fn synthesize(&self, how: &Synthesis<'_>) -> String {
        let newest = self.messages.last();
        let alone = self.messages.len() == 1;
        let current_msg = match newest {
            Some(m) if !alone && (how.current == Current::Newest || asks_for_something(m)) => Some(m),
            _ => None,
        };
        let mut core = self.core();
        if let Some(current) = current_msg {
            core.retain(|m| m.seq != current.seq);
            if core.is_empty() {
                core.extend(self.messages.first());
            }
        }
        let core_seqs: Vec<u64> = core.iter().map(|m| m.seq).collect();
        let mission = if core.is_empty() {
            "(no problem has been stated yet)".to_owned()
        } else {
            mission(&core, how.budgets.mission)
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
        let current = match (newest, current_msg) {
            (None, _) => "(no message yet)".to_owned(),
            (Some(_), Some(m)) => clip(&render(m), how.budgets.current),
            (Some(_), None) if alone => "(The problem stated in the Mission is the request.)".to_owned(),
            (Some(_), None) => {
                "(The newest message asks for nothing new: the Mission and the Constraints are the request.)"
                    .to_owned()
            }
        };
        let before: Vec<&StoredMessage> = self
            .messages
            .iter()
            .filter(|m| current_msg.is_none_or(|c| c.seq != m.seq) && !core_seqs.contains(&m.seq))
            .collect();
        let recent = recent(&before, how.recent_turns, how.budgets.recent);
        crate::prompts::fill(
            how.template,
            &[
                ("core", mission.as_str()),
                ("constraints", constraints.as_str()),
                ("recent", recent.as_str()),
                ("current", current.as_str()),
            ],
        )
    }
}

/// The Mission within `budget`: the opening post first (cut when it alone
/// is larger), then the other problem statements, newest first, while
/// they fit; shown in thread order.
fn mission(core: &[&StoredMessage], budget: u64) -> String {
    let mut order: Vec<&StoredMessage> = core
        .iter()
        .filter(|m| super::is_opening_post(m))
        .copied()
        .collect();
    let mut others: Vec<&StoredMessage> = core
        .iter()
        .filter(|m| !super::is_opening_post(m))
        .copied()
        .collect();
    others.reverse();
    order.extend(others);
    let mut left = budget;
    let mut kept: Vec<(u64, String)> = Vec::new();
    let mut left_out = Vec::new();
    for (i, m) in order.iter().enumerate() {
        let text = render(m);
        let tokens = count_text(&text);
        if tokens <= left {
            left -= tokens;
            kept.push((m.seq, text));
        } else if i == 0 || left >= SMALLEST_CUT {
            kept.push((m.seq, clip(&text, left)));
            left = 0;
        } else {
            left_out.push(format!("@{}", m.author));
        }
    }
    kept.sort_by_key(|(seq, _)| *seq);
    let mut out = kept.into_iter().map(|(_, t)| t).collect::<Vec<_>>().join("\n\n");
    if !left_out.is_empty() {
        out.push_str(&format!(
            "\n\n({} more problem statement(s), by {}, are left out for length; they are on the thread.)",
            left_out.len(),
            left_out.join(", ")
        ));
    }
    out
}

/// The last `turns` of `before`, within `budget`, oldest first.
fn recent(before: &[&StoredMessage], turns: usize, budget: u64) -> String {
    let mut left = budget;
    let mut kept = Vec::new();
    let mut cut_short = 0;
    for (i, m) in before.iter().rev().take(turns).enumerate() {
        let text = render(m);
        let tokens = count_text(&text);
        if tokens <= left {
            left -= tokens;
            kept.push(text);
        } else if left >= SMALLEST_CUT {
            kept.push(clip(&text, left));
            left = 0;
        } else {
            cut_short = turns.min(before.len()) - i;
            break;
        }
    }
    kept.reverse();
    if kept.is_empty() && cut_short == 0 {
        return "(none)".to_owned();
    }
    let mut out = String::new();
    if cut_short > 0 {
        out.push_str(&format!(
            "({cut_short} earlier message(s) left out for length; they are on the thread.)\n\n"
        ));
    }
    out.push_str(&kept.join("\n\n"));
    out
}

/// `text` within `budget` tokens: its beginning, and a line saying how
/// much was left out.
pub fn clip(text: &str, budget: u64) -> String {
    let tokens = count_text(text);
    if tokens <= budget {
        return text.to_owned();
    }
    let room = budget.saturating_sub(40);
    // Shrink proportionally until it fits (token density varies).
    let mut end = (text.len() as u64 * room / tokens.max(1)) as usize;
    loop {
        while end > 0 && !text.is_char_boundary(end) {
            end -= 1;
        }
        if end == 0 || count_text(&text[..end]) <= room {
            break;
        }
        end = end * 9 / 10;
    }
    let kept = &text[..end];
    let left = tokens.saturating_sub(count_text(kept));
    format!(
        "{}\n[… the rest of this message, about {left} tokens, is left out for length; it is on the thread]",
        kept.trim_end()
    )
}

/// Whose words these are, for the model.
fn who(m: &StoredMessage) -> String {
    match &m.voice {
        Voice::Member => format!("@{}", m.author),
        Voice::Reporter { vouched_by } => format!(
            "@{}, the reporter: not a maintainer; @{vouched_by}'s label vouches for the text as it stood when labelled",
            m.author
        ),
    }
}

/// A message with its author.
pub(super) fn render(m: &StoredMessage) -> String {
    format!("{}:\n{}", who(m), m.text.trim())
}

/// One Evolving entry: its whole text, or its summary once it has one,
/// marked as standing for a longer text.
pub(super) fn evolving_line(m: &StoredMessage) -> String {
    match &m.summary {
        Some(summary) => format!("- (summary) {summary} ({})", who(m)),
        None => {
            let text = m.text.trim().replace('\n', "\n  ");
            format!("- {text} ({})", who(m))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_text_is_cut_and_says_so() {
        let text = "word ".repeat(5_000);
        let cut = clip(&text, 1_000);
        assert!(count_text(&cut) <= 1_000, "{}", count_text(&cut));
        assert!(cut.ends_with("is left out for length; it is on the thread]"));
        assert_eq!(clip("short", 1_000), "short");
    }
}
