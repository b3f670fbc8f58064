//! The agent's run as it stood at its last step boundary: the conversation
//! (every provider's reasoning items and signatures kept verbatim, as
//! `llm::Message` holds them), the steps made, and the sandbox's tree as a
//! commit in a quarantine repository on the host. A task killed mid-run
//! resumes from here instead of starting its agent run over. The change
//! phase's record, replaced at every step.

use super::records::PhaseRecord;
use crate::llm::Message;
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
    /// The run that wrote the quarantine (its folders are
    /// `<writer>-slot-{0,1}.git`); empty in a record of an earlier version
    /// (`slot-{0,1}.git`).
    #[serde(default)]
    pub writer: String,
    /// The base commit the run started from; a resume on another base
    /// starts over.
    pub base: String,
    /// The sandbox image the run worked in; a resume in another starts over.
    pub image: String,
    /// A digest of the request and the plan the run was given; a resume
    /// given others starts over (empty in a record of an earlier version).
    #[serde(default)]
    pub asked: String,
    pub messages: Vec<Message>,
}

impl PhaseRecord for AgentCheckpoint {
    const PHASE: &'static str = "agent";
}

/// Before phase records, checkpoints had a table of their own: its rows
/// become records, the newer of the two where both are (an older daemon
/// ran on the journal meanwhile); the table stays, empty, for an older
/// daemon.
pub(super) fn adopt_agent_checkpoints(db: &rusqlite::Connection) -> rusqlite::Result<()> {
    let earlier: i64 = db.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'agent_checkpoints'",
        [],
        |r| r.get(0),
    )?;
    if earlier == 0 {
        return Ok(());
    }
    db.execute_batch(
        "INSERT INTO phase_records (task_key, phase, record, saved_at)
            SELECT task_key, 'agent', record, saved_at FROM agent_checkpoints WHERE true
            ON CONFLICT (task_key, phase) DO UPDATE SET record = excluded.record, saved_at = excluded.saved_at
            WHERE excluded.saved_at > phase_records.saved_at;
         DELETE FROM agent_checkpoints;",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::{Journal, Phase, Transition};
    use crate::llm::{Api, NativeTurn, ToolCall, ToolResult};

    #[test]
    fn a_checkpoint_keeps_the_conversation_verbatim_and_goes_with_the_task() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(dir.path()).unwrap();
        let key = "github:acme/app:issue:3";
        journal.begin(key).unwrap();
        assert_eq!(journal.record::<AgentCheckpoint>(key).unwrap(), None);
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
            writer: "0123456789abcdef".into(),
            base: "b".repeat(40),
            image: "forgehand-python:3.12".into(),
            asked: String::new(),
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
        journal.save_record(key, &checkpoint, 1 << 20).unwrap();
        assert_eq!(
            journal.record::<AgentCheckpoint>(key).unwrap().as_ref(),
            Some(&checkpoint)
        );
        checkpoint.step = 2;
        checkpoint.slot = 1;
        // One over the limit is not written: the one before stays.
        let weight = journal.save_record(key, &checkpoint, 100).unwrap();
        assert!(weight > 100);
        assert_eq!(
            journal.record::<AgentCheckpoint>(key).unwrap().map(|c| c.step),
            Some(1)
        );
        journal.save_record(key, &checkpoint, 1 << 20).unwrap();
        assert_eq!(journal.record::<AgentCheckpoint>(key).unwrap(), Some(checkpoint));
        journal
            .transition(key, Transition::ended(Phase::Done, "delivered"))
            .unwrap();
        assert_eq!(journal.record::<AgentCheckpoint>(key).unwrap(), None);
    }

    #[test]
    fn a_checkpoint_of_the_earlier_table_is_read_back_as_the_agent_record() {
        let dir = tempfile::tempdir().unwrap();
        let key = "github:acme/app:issue:4";
        let record =
            r#"{"step":3,"tool_calls":4,"commit":"aa","slot":1,"base":"bb","image":"img","messages":[]}"#;
        {
            let db = rusqlite::Connection::open(dir.path().join("journal.sqlite3")).unwrap();
            db.execute_batch(
                "CREATE TABLE agent_checkpoints (task_key TEXT PRIMARY KEY, record TEXT NOT NULL, saved_at INTEGER NOT NULL);",
            )
            .unwrap();
            db.execute(
                "INSERT INTO agent_checkpoints VALUES (?1, ?2, 0)",
                rusqlite::params![key, record],
            )
            .unwrap();
        }
        let journal = Journal::open(dir.path()).unwrap();
        let adopted = journal.record::<AgentCheckpoint>(key).unwrap().unwrap();
        assert_eq!(
            (adopted.step, adopted.slot, adopted.commit.as_str()),
            (3, 1, "aa")
        );
        // Opened again: adopted once, not twice.
        drop(journal);
        let journal = Journal::open(dir.path()).unwrap();
        assert_eq!(
            journal.record_keys::<AgentCheckpoint>().unwrap(),
            vec![key.to_owned()]
        );
        // An older daemon wrote its table again meanwhile: the newer wins.
        drop(journal);
        let newer = record.replace(r#""step":3"#, r#""step":5"#);
        let write_earlier = |key: &str, record: &str, saved_at: i64| {
            let db = rusqlite::Connection::open(dir.path().join("journal.sqlite3")).unwrap();
            db.execute(
                "INSERT INTO agent_checkpoints VALUES (?1, ?2, ?3)",
                rusqlite::params![key, record, saved_at],
            )
            .unwrap();
        };
        write_earlier(key, &newer, 4_102_444_800);
        write_earlier("github:acme/app:issue:5", record, 0);
        let journal = Journal::open(dir.path()).unwrap();
        assert_eq!(
            journal.record::<AgentCheckpoint>(key).unwrap().map(|c| c.step),
            Some(5)
        );
        // An older one does not replace a newer record.
        drop(journal);
        write_earlier(key, record, 0);
        let journal = Journal::open(dir.path()).unwrap();
        assert_eq!(
            journal.record::<AgentCheckpoint>(key).unwrap().map(|c| c.step),
            Some(5)
        );
        assert_eq!(journal.record_keys::<AgentCheckpoint>().unwrap().len(), 2);
    }
}
