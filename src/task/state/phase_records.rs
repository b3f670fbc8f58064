//! What the task's phases hand on, as records the journal keeps (see
//! [`crate::journal::PhaseRecord`]): saved when a phase ends, read back
//! when the task starts again. The agent's run has its own, replaced at
//! every step (its checkpoint, in [`crate::task::state::checkpoint`]).
//!
//! - Prepared: where the task stands (branch, base, image, language, a
//!   digest of the repository's settings, the setup snapshot's key). A
//!   start on other ground says what changed in the log.
//! - Planned: the plan, with the ground and the request it was made for.
//!   A start on the same ground with the same request follows it without
//!   a new debate (no packing, no replay).
//! - Pushed: the branch and the model's summary, for the PR/MR a start
//!   after the push opens.

use crate::journal::PhaseRecord;
use crate::task::phases::task_plan::TaskPlan;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Where the prepared task stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(in crate::task) struct PreparedRecord {
    pub branch: String,
    pub base: String,
    pub image: String,
    pub language: String,
    /// A digest of the repository's settings as resolved (its file and the
    /// operator's entry).
    pub settings: String,
    /// The setup snapshot's key, when setup has one.
    pub snapshot: Option<String>,
}

impl PhaseRecord for PreparedRecord {
    const PHASE: &'static str = "prepared";
}

impl PreparedRecord {
    /// What differs in `now` from this record, in a few words each.
    pub fn changes(&self, now: &PreparedRecord) -> Vec<String> {
        let mut changes = Vec::new();
        // Commits and digests are named by their first 12 digits.
        let fields = [
            ("base", short(&self.base), short(&now.base)),
            ("branch", &*self.branch, &*now.branch),
            ("image", &*self.image, &*now.image),
            ("language", &*self.language, &*now.language),
            ("settings", short(&self.settings), short(&now.settings)),
        ];
        for (name, before, after) in fields {
            if before != after {
                changes.push(format!("{name} {before} -> {after}"));
            }
        }
        changes
    }

    /// Whether a plan made on this ground holds on `now`: the same code on
    /// the same branch, read with the same settings.
    pub fn same_ground(&self, now: &PreparedRecord) -> bool {
        self.base == now.base && self.branch == now.branch && self.settings == now.settings
    }
}

fn short(text: &str) -> &str {
    text.get(..12).unwrap_or(text)
}

/// The plan, and what it was made for.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(in crate::task) struct PlannedRecord {
    pub ground: PreparedRecord,
    /// The planning request (the synthesised request, the instructions,
    /// the changes a writer asked for).
    pub request: String,
    pub plan: TaskPlan,
}

impl PhaseRecord for PlannedRecord {
    const PHASE: &'static str = "planned";
}

/// The pushed branch, its head and the model's summary for the PR/MR.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(in crate::task) struct PushedRecord {
    pub branch: String,
    /// The commit the branch was pushed at.
    pub commit: Option<String>,
    pub summary: String,
}

impl PhaseRecord for PushedRecord {
    const PHASE: &'static str = "pushed";
}

/// A push about to go out: the commit the branch is pushed at, and the
/// summary. A run killed after the push but before its record finds the
/// remote branch at `commit` and goes on to delivery instead of making
/// the change again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(in crate::task) struct PushingRecord {
    pub branch: String,
    pub commit: String,
    pub summary: String,
}

impl PhaseRecord for PushingRecord {
    const PHASE: &'static str = "pushing";
}

/// The progress comment as a run that ended waiting left it.
impl PhaseRecord for crate::task::report::progress::KeptProgress {
    const PHASE: &'static str = "progress";
}

/// A hex SHA-256 of `text`.
pub(in crate::task) fn digest(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ground(base: &str, settings: &str) -> PreparedRecord {
        PreparedRecord {
            branch: "forgehand/issue-3".into(),
            base: base.into(),
            image: "forgehand-python:3.12".into(),
            language: "Python".into(),
            settings: settings.into(),
            snapshot: None,
        }
    }

    #[test]
    fn a_plan_holds_on_the_same_code_and_settings_only() {
        let before = ground(&"a".repeat(40), &digest("settings"));
        let mut image = before.clone();
        image.image = "forgehand-python:3.13".into();
        assert!(before.same_ground(&image));
        assert_eq!(image.changes(&image), Vec::<String>::new());
        assert_eq!(
            before.changes(&image),
            vec!["image forgehand-python:3.12 -> forgehand-python:3.13".to_owned()]
        );
        let moved = ground(&"b".repeat(40), &digest("settings"));
        assert!(!before.same_ground(&moved));
        assert_eq!(
            before.changes(&moved),
            vec!["base aaaaaaaaaaaa -> bbbbbbbbbbbb".to_owned()]
        );
        assert!(!before.same_ground(&ground(&"a".repeat(40), &digest("other settings"))));
    }
}
