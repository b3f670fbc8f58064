//! Where a task's checkpoints are kept: the record (the conversation, the
//! steps, the commit, the quarantine's folder) where the task's records are
//! (the journal, or the store the replicas share: see
//! [`crate::task::state::records`]), and the quarantine repositories the commits
//! are in, beside it:
//!
//! - in this daemon's state: `<daemon.state_dir>/checkpoints/<task>/`;
//! - among replicas with `cluster.checkpoint_dir`:
//!   `<checkpoint_dir>/<task>/agent/`, so the replica that takes the task
//!   over resumes its run.
//!
//! Each run writes quarantines of its own (`<writer>-slot-{0,1}.git`, the
//! two taking turns), named in its record: a run left behind (a replica
//! whose claim ran out, a take-out a cancelled run left going on) never
//! writes the folder another run's record names. Once a run's first
//! record is written, the folders of the runs before it are removed.

use crate::config::Config;
use crate::forge::ItemRef;
use crate::journal::{AgentCheckpoint, Journal};
use crate::task::state::records::{folder_name, remove_folder, shared_root, RecordError, TaskRecords};
use std::path::{Path, PathBuf};

/// One task's checkpoints.
#[derive(Clone)]
pub(in crate::task) struct Store {
    /// The quarantines' folder.
    pub dir: PathBuf,
    pub records: TaskRecords,
    pub key: String,
}

impl Store {
    /// Task `item`'s checkpoints, beside its `records`.
    pub fn for_task(config: &Config, item: &ItemRef, records: TaskRecords) -> Store {
        let dir = match records.shared_dir() {
            Some(task) => task.join("agent"),
            None => local_root(&config.daemon.state_dir).join(folder_name(item)),
        };
        Store {
            dir,
            records,
            key: item.key(),
        }
    }

    /// Quarantine `slot` of `writer` (a record of an earlier version names
    /// none: its folders were `slot-{0,1}.git`).
    pub fn slot_dir(&self, writer: &str, slot: u8) -> PathBuf {
        match writer {
            "" => self.dir.join(format!("slot-{slot}.git")),
            writer => self.dir.join(format!("{writer}-slot-{slot}.git")),
        }
    }

    /// This run's name among the task's writers.
    pub fn writer(&self) -> &str {
        self.records.writer()
    }

    /// Whether the task still holds its claim (always, outside a shared store).
    pub fn held(&self) -> bool {
        self.records.held()
    }

    /// Records `checkpoint` in place of the one before when it weighs at
    /// most `max_bytes`; its weight (over the limit: nothing is written).
    pub fn save(&self, checkpoint: &AgentCheckpoint, max_bytes: usize) -> Result<usize, RecordError> {
        self.records.save(checkpoint, max_bytes)
    }

    /// Removes the quarantines of the runs before this one (its own record
    /// names its own now).
    pub fn remove_earlier_writers(&self) {
        let own = format!("{}-slot-", self.writer());
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            if !entry.file_name().to_string_lossy().starts_with(&own) {
                remove_folder(&entry.path());
            }
        }
    }

    /// Forgets the task's checkpoints (its change is pushed, or it ended);
    /// a shared store's only while the task holds its claim (once it is
    /// lost they are the next holder's).
    pub fn forget(&self) {
        if !self.held() {
            return;
        }
        self.records.forget::<AgentCheckpoint>();
        self.records.remove_now(&self.dir);
    }
}

fn local_root(state_dir: &Path) -> PathBuf {
    state_dir.join("checkpoints")
}

/// Task `item`'s folder name, its checkpoints moved there from a folder
/// named by the slug alone (as earlier versions named it).
fn adopt_slug_folder(root: &Path, item: &ItemRef) -> String {
    let name = folder_name(item);
    let (old, new) = (root.join(item.slug()), root.join(&name));
    if old.is_dir() && !new.exists() {
        if let Err(e) = std::fs::rename(&old, &new) {
            tracing::warn!(task = %item, "cannot move the checkpoints {} to {}: {e}", old.display(), new.display());
        }
    }
    name
}

/// At the daemon's start, before any task runs: removes this daemon's
/// checkpoint folders no journalled checkpoint names (tasks that ended
/// while their folder could not be removed, or were never run again).
/// Among replicas sharing a store nothing is swept: other replicas' runs
/// are there, and nothing is kept in this daemon's state.
pub fn sweep(config: &Config, journal: &Journal) {
    if shared_root(config).is_some() {
        return;
    }
    let root = local_root(&config.daemon.state_dir);
    let Ok(entries) = std::fs::read_dir(&root) else {
        return;
    };
    let kept: std::collections::HashSet<String> = match journal.record_keys::<AgentCheckpoint>() {
        Ok(keys) => keys
            .iter()
            .filter_map(|key| ItemRef::parse_key(key))
            .map(|item| adopt_slug_folder(&root, &item))
            .collect(),
        Err(e) => {
            tracing::warn!("cannot list the journalled checkpoints ({e}); none is swept");
            return;
        }
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !kept.contains(&name) {
            remove_folder(&entry.path());
            removed += 1;
        }
    }
    if removed > 0 {
        tracing::info!(count = removed, "removed checkpoints no unfinished task uses");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(repo: &str, number: u64) -> ItemRef {
        ItemRef::github_issue(repo, number)
    }

    fn checkpoint(step: u32) -> AgentCheckpoint {
        AgentCheckpoint {
            step,
            tool_calls: step,
            commit: "a".repeat(40),
            slot: (step % 2) as u8,
            writer: String::new(),
            base: "b".repeat(40),
            image: "forgehand-python:3.12".into(),
            asked: String::new(),
            messages: vec![crate::llm::Message::User("Fix it".into())],
        }
    }

    fn config(state: &Path) -> Config {
        let mut config = Config::defaults();
        config.daemon.state_dir = state.to_owned();
        config
    }

    #[test]
    fn a_run_removes_the_quarantines_of_the_runs_before_it_and_keeps_its_own() {
        let state = tempfile::tempdir().unwrap();
        let journal = std::sync::Arc::new(Journal::open(state.path()).unwrap());
        let task = item("acme/app", 1);
        let forge: std::sync::Arc<dyn crate::forge::Forge> =
            std::sync::Arc::new(crate::task::tests::forge::MemoryForge::new(String::new()));
        let config = config(state.path());
        let store = Store::for_task(
            &config,
            &task,
            TaskRecords::for_task(&config, &task, journal, forge),
        );
        let earlier = store.slot_dir("", 0);
        let ours = store.slot_dir(store.writer(), 1);
        assert_ne!(earlier, ours);
        for dir in [&earlier, &ours] {
            std::fs::create_dir_all(dir).unwrap();
        }
        store.remove_earlier_writers();
        assert!(!earlier.exists() && ours.exists());
    }

    #[test]
    fn the_sweep_keeps_the_folders_of_journalled_checkpoints_only() {
        let state = tempfile::tempdir().unwrap();
        let journal = Journal::open(state.path()).unwrap();
        let (kept, orphan) = (item("acme/app", 1), item("acme/app", 2));
        journal.begin(&kept.key()).unwrap();
        journal.save_record(&kept.key(), &checkpoint(1), 1 << 20).unwrap();
        for task in [&kept, &orphan] {
            std::fs::create_dir_all(
                local_root(state.path())
                    .join(folder_name(task))
                    .join("slot-0.git"),
            )
            .unwrap();
        }
        // One of an earlier version, named by the slug alone.
        let earlier = item("acme/app", 3);
        journal.begin(&earlier.key()).unwrap();
        journal
            .save_record(&earlier.key(), &checkpoint(2), 1 << 20)
            .unwrap();
        std::fs::create_dir_all(local_root(state.path()).join(earlier.slug()).join("slot-0.git")).unwrap();
        sweep(&config(state.path()), &journal);
        assert!(local_root(state.path()).join(folder_name(&kept)).exists());
        assert!(!local_root(state.path()).join(folder_name(&orphan)).exists());
        assert!(local_root(state.path())
            .join(folder_name(&earlier))
            .join("slot-0.git")
            .exists());
        assert!(!local_root(state.path()).join(earlier.slug()).exists());
    }
}
