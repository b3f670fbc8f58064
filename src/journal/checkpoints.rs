//! The agent's run as it stood at its last step boundary: the conversation
//! (every provider's reasoning items and signatures kept verbatim, as
//! `llm::Message` holds them), the steps made, and the sandbox's tree as a
//! commit in a quarantine repository on the host. A task killed mid-run
//! resumes from here instead of starting its agent run over.

use super::{now, Journal, JournalError};
use crate::llm::Message;
use rusqlite::{params, OptionalExtension};
use serde::{Deserialize, Serialize};

/// One task's last checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentCheckpoint {
    /// The step the conversation ends with.
    pub step: u32,
    pub tool_calls: u32,
    /// The commit holding the sandbox's tree (its parent: the model's own
    /// HEAD then), in the quarantine repository `slot`.
    pub commit: String,
    /// Which of the task's two quarantine repositories holds `commit`
    /// (the next checkpoint is written into the other, so a kill while it
    /// is written leaves this one whole).
    pub slot: u8,
    /// The base commit the run started from; a resume on another base
    /// starts over.
    pub base: String,
    /// The sandbox image the run worked in; a resume in another starts over.
    pub image: String,
    pub messages: Vec<Message>,
}

impl Journal {
    pub(super) fn create_agent_checkpoints(db: &rusqlite::Connection) -> rusqlite::Result<()> {
        db.execute_batch(
            "CREATE TABLE IF NOT EXISTS agent_checkpoints (
                task_key TEXT PRIMARY KEY,
                record TEXT NOT NULL,
                saved_at INTEGER NOT NULL
            );",
        )
    }

    /// Records task `key`'s checkpoint in place of the one before, when
    /// it weighs at most `max_bytes`; its weight (over the limit: nothing
    /// is written, the one before stays).
    pub fn save_agent_checkpoint(
        &self,
        key: &str,
        checkpoint: &AgentCheckpoint,
        max_bytes: usize,
    ) -> Result<usize, JournalError> {
        // A conversation is strings and JSON values: it always serialises.
        let record = serde_json::to_string(checkpoint).unwrap_or_default();
        if record.len() > max_bytes {
            return Ok(record.len());
        }
        self.with(|db| {
            db.execute(
                "INSERT OR REPLACE INTO agent_checkpoints (task_key, record, saved_at) VALUES (?1, ?2, ?3)",
                params![key, record, now()],
            )
            .map(drop)
        })?;
        Ok(record.len())
    }

    /// Task `key`'s last checkpoint, if its run has one (one that cannot
    /// be read is none: the run starts over).
    pub fn agent_checkpoint(&self, key: &str) -> Result<Option<AgentCheckpoint>, JournalError> {
        let record: Option<String> = self.with(|db| {
            db.query_row(
                "SELECT record FROM agent_checkpoints WHERE task_key = ?1",
                params![key],
                |r| r.get(0),
            )
            .optional()
        })?;
        Ok(record.and_then(|r| match serde_json::from_str(&r) {
            Ok(checkpoint) => Some(checkpoint),
            Err(e) => {
                tracing::warn!(
                    task = key,
                    "the agent's checkpoint cannot be read ({e}); the run starts over"
                );
                None
            }
        }))
    }

    /// The tasks that have a checkpoint.
    pub fn agent_checkpoint_keys(&self) -> Result<Vec<String>, JournalError> {
        self.with(|db| {
            let mut query = db.prepare("SELECT task_key FROM agent_checkpoints")?;
            let keys = query.query_map([], |r| r.get(0))?;
            keys.collect()
        })
    }

    /// Forgets task `key`'s checkpoint (its change is pushed, or it ended).
    pub fn forget_agent_checkpoint(&self, key: &str) -> Result<(), JournalError> {
        self.with(|db| Journal::forget_checkpoint_in(db, key))
    }

    pub(super) fn forget_checkpoint_in(db: &rusqlite::Connection, key: &str) -> rusqlite::Result<()> {
        db.execute("DELETE FROM agent_checkpoints WHERE task_key = ?1", params![key])
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::Phase;
    use crate::llm::{Api, NativeTurn, ToolCall, ToolResult};

    #[test]
    fn a_checkpoint_keeps_the_conversation_verbatim_and_goes_with_the_task() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(dir.path()).unwrap();
        let key = "github:acme/app:issue:3";
        journal.begin(key).unwrap();
        assert_eq!(journal.agent_checkpoint(key).unwrap(), None);
        let call = ToolCall {
            id: "call_1".into(),
            name: "command_executor_execute_command".into(),
            arguments: r#"{"command":"ls"}"#.into(),
        };
        let mut checkpoint = AgentCheckpoint {
            step: 1,
            tool_calls: 1,
            commit: "a".repeat(40),
            slot: 0,
            base: "b".repeat(40),
            image: "forgehand-python:3.12".into(),
            messages: vec![
                Message::User("Fix it".into()),
                Message::Assistant {
                    text: String::new(),
                    tool_calls: vec![call.clone()],
                    native: Some(NativeTurn {
                        api: Api::Messages,
                        model: "claude-opus-4-5".into(),
                        content: serde_json::json!([
                            {"type": "thinking", "thinking": "Look first.", "signature": "c2lnbmVk"},
                            {"type": "tool_use", "id": "call_1", "name": "command_executor_execute_command", "input": {"command": "ls"}}
                        ]),
                    }),
                },
                Message::ToolResults(vec![ToolResult {
                    call_id: "call_1".into(),
                    name: call.name.clone(),
                    content: "README.md".into(),
                    is_error: false,
                }]),
            ],
        };
        journal.save_agent_checkpoint(key, &checkpoint, 1 << 20).unwrap();
        assert_eq!(journal.agent_checkpoint(key).unwrap().as_ref(), Some(&checkpoint));
        checkpoint.step = 2;
        checkpoint.slot = 1;
        // One over the limit is not written: the one before stays.
        let weight = journal.save_agent_checkpoint(key, &checkpoint, 100).unwrap();
        assert!(weight > 100);
        assert_eq!(journal.agent_checkpoint(key).unwrap().map(|c| c.step), Some(1));
        journal.save_agent_checkpoint(key, &checkpoint, 1 << 20).unwrap();
        assert_eq!(journal.agent_checkpoint(key).unwrap(), Some(checkpoint));
        journal.finish(key, Phase::Done, "delivered").unwrap();
        assert_eq!(journal.agent_checkpoint(key).unwrap(), None);
    }
}
