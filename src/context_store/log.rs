//! Where context stores are kept between runs: the journal in the daemon,
//! memory for the MCP server's sessions and tests. A message that is
//! edited or deleted on the thread leaves the store, and its old text is
//! kept apart for audit: never in a prompt again.

use super::StoredMessage;
use std::collections::HashMap;
use std::sync::Mutex;

/// Why a stored message was retired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retired {
    /// Its text changed on the thread; a new version took its place.
    Edited,
    /// It is gone from the thread (deleted, or its author is no longer heard).
    Deleted,
}

impl Retired {
    pub fn as_str(self) -> &'static str {
        match self {
            Retired::Edited => "edited",
            Retired::Deleted => "deleted",
        }
    }
}

pub trait ContextLog: Send + Sync {
    fn load(&self, store: &str) -> Vec<StoredMessage>;
    /// Writes `message`, replacing the one of the same `seq` if there is one.
    fn save(&self, store: &str, message: &StoredMessage);
    /// Adds a new message and returns the `seq` the log gave it: the next
    /// one of the store as the log holds it now, so two runs of one store
    /// (an issue and its PR/MR at once) never write the same number. A
    /// message whose source the store holds already keeps its number.
    fn append(&self, store: &str, message: &StoredMessage) -> u64;
    /// Keeps `old` for audit and puts `new` (same `seq`) in its place.
    fn revise(&self, store: &str, old: &StoredMessage, new: &StoredMessage);
    /// Keeps `old` for audit and takes it out of the store.
    fn delete(&self, store: &str, old: &StoredMessage);
}

/// Stores in memory (the MCP server's sessions, tests).
#[derive(Default)]
pub struct MemoryLog {
    stores: Mutex<HashMap<String, Vec<StoredMessage>>>,
    retired: Mutex<HashMap<String, Vec<(Retired, StoredMessage)>>>,
}

impl MemoryLog {
    /// The retired versions of `store`'s messages, oldest first.
    pub fn retired(&self, store: &str) -> Vec<(Retired, StoredMessage)> {
        let retired = self.retired.lock().unwrap_or_else(|p| p.into_inner());
        retired.get(store).cloned().unwrap_or_default()
    }

    fn retire(&self, store: &str, why: Retired, old: &StoredMessage) {
        let mut retired = self.retired.lock().unwrap_or_else(|p| p.into_inner());
        retired
            .entry(store.to_owned())
            .or_default()
            .push((why, old.clone()));
    }
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

    fn revise(&self, store: &str, old: &StoredMessage, new: &StoredMessage) {
        self.retire(store, Retired::Edited, old);
        self.save(store, new);
    }

    fn delete(&self, store: &str, old: &StoredMessage) {
        self.retire(store, Retired::Deleted, old);
        let mut stores = self.stores.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(messages) = stores.get_mut(store) {
            messages.retain(|m| m.seq != old.seq);
        }
    }
}
