//! The tasks in flight, as the status page shows them: what each is doing
//! now, since when, and its tokens and cost so far. Every task keeps its
//! own line current as it reports progress; the line goes when it ends.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;

#[derive(Debug, Clone, PartialEq)]
pub struct LiveTask {
    /// `acme/app#12`.
    pub name: String,
    pub web_url: String,
    /// The progress comment's current line.
    pub status: String,
    pub started: SystemTime,
    pub tokens: u64,
    pub cost: f64,
}

fn lines() -> &'static Mutex<BTreeMap<String, LiveTask>> {
    static BOARD: OnceLock<Mutex<BTreeMap<String, LiveTask>>> = OnceLock::new();
    BOARD.get_or_init(Default::default)
}

/// Sets the line of task `key`.
pub fn set(key: &str, task: LiveTask) {
    lines()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key.to_owned(), task);
}

/// Changes the line of task `key`, if it has one.
pub fn update(key: &str, change: impl FnOnce(&mut LiveTask)) {
    if let Some(task) = lines().lock().unwrap_or_else(|p| p.into_inner()).get_mut(key) {
        change(task);
    }
}

pub fn remove(key: &str) {
    lines().lock().unwrap_or_else(|p| p.into_inner()).remove(key);
}

/// Every task in flight, oldest first.
pub fn snapshot() -> Vec<LiveTask> {
    let mut all: Vec<LiveTask> = lines()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .values()
        .cloned()
        .collect();
    all.sort_by_key(|t| t.started);
    all
}
