//! The tasks in flight, as the status page shows them: what each is doing
//! now, since when, and its tokens and cost so far. Every task keeps its
//! own line current as it reports progress; the line goes when it ends.

use std::collections::BTreeMap;
use std::sync::Mutex;
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

/// The lines of every task in flight. One per daemon, shared by its tasks
/// (across config reloads) and the status page.
#[derive(Debug, Default)]
pub struct Board {
    lines: Mutex<BTreeMap<String, LiveTask>>,
}

impl Board {
    fn lines(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, LiveTask>> {
        self.lines.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets the line of task `key`.
    pub fn set(&self, key: &str, task: LiveTask) {
        self.lines().insert(key.to_owned(), task);
    }

    /// Changes the line of task `key`, if it has one.
    pub fn update(&self, key: &str, change: impl FnOnce(&mut LiveTask)) {
        if let Some(task) = self.lines().get_mut(key) {
            change(task);
        }
    }

    pub fn remove(&self, key: &str) {
        self.lines().remove(key);
    }

    /// Every task in flight, oldest first.
    pub fn snapshot(&self) -> Vec<LiveTask> {
        self.keyed_snapshot().into_iter().map(|(_, task)| task).collect()
    }

    /// Every task in flight with its key, oldest first.
    pub fn keyed_snapshot(&self) -> Vec<(String, LiveTask)> {
        let mut all: Vec<(String, LiveTask)> = self
            .lines()
            .iter()
            .map(|(key, task)| (key.clone(), task.clone()))
            .collect();
        all.sort_by_key(|(_, t)| t.started);
        all
    }
}
