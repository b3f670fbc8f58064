//! Undo history: for each file, the contents before each edit (or "did not
//! exist" before a `create`). Bounded in depth per file and in bytes overall;
//! the oldest steps are forgotten first.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};

/// What a file was before an edit.
pub type Before = Option<Vec<u8>>;

pub struct History {
    per_file: HashMap<PathBuf, VecDeque<(u64, Before)>>,
    /// Every step in the order it was recorded, for evicting the oldest.
    order: VecDeque<(u64, PathBuf)>,
    next_seq: u64,
    bytes: usize,
    max_bytes: usize,
    max_depth: usize,
}

fn size(before: &Before) -> usize {
    before.as_ref().map_or(0, Vec::len)
}

impl History {
    pub fn new(max_bytes: usize, max_depth: usize) -> History {
        History {
            per_file: HashMap::new(),
            order: VecDeque::new(),
            next_seq: 0,
            bytes: 0,
            max_bytes,
            max_depth: max_depth.max(1),
        }
    }

    /// Records the state of `path` before an edit. Returns false when the
    /// step is too large to keep (the edit then cannot be undone).
    pub fn record(&mut self, path: &Path, before: Before) -> bool {
        if size(&before) > self.max_bytes {
            return false;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.bytes += size(&before);
        let steps = self.per_file.entry(path.to_owned()).or_default();
        steps.push_back((seq, before));
        if steps.len() > self.max_depth {
            if let Some((_, dropped)) = steps.pop_front() {
                self.bytes -= size(&dropped);
            }
        }
        self.order.push_back((seq, path.to_owned()));
        while self.bytes > self.max_bytes {
            let Some((oldest, file)) = self.order.pop_front() else {
                break;
            };
            if let Some(steps) = self.per_file.get_mut(&file) {
                // Steps already undone or dropped are gone; skip them.
                if steps.front().map(|(s, _)| *s) == Some(oldest) {
                    if let Some((_, dropped)) = steps.pop_front() {
                        self.bytes -= size(&dropped);
                    }
                }
            }
        }
        if self.order.len() > 4 * self.max_depth.max(64) * self.per_file.len().max(1) {
            self.compact_order();
        }
        true
    }

    /// The state before the last edit of `path`, removed from the history.
    pub fn pop(&mut self, path: &Path) -> Option<Before> {
        let steps = self.per_file.get_mut(path)?;
        let (_, before) = steps.pop_back()?;
        if steps.is_empty() {
            self.per_file.remove(path);
        }
        self.bytes -= size(&before);
        Some(before)
    }

    /// Drops bookkeeping of steps that no longer exist.
    fn compact_order(&mut self) {
        let live: std::collections::HashSet<u64> = self
            .per_file
            .values()
            .flat_map(|steps| steps.iter().map(|(s, _)| *s))
            .collect();
        self.order.retain(|(seq, _)| live.contains(seq));
    }

    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_come_back_last_first() {
        let mut history = History::new(1000, 10);
        let file = Path::new("/p/a");
        history.record(file, None);
        history.record(file, Some(b"one".to_vec()));
        assert_eq!(history.pop(file), Some(Some(b"one".to_vec())));
        assert_eq!(history.pop(file), Some(None));
        assert_eq!(history.pop(file), None);
        assert_eq!(history.bytes(), 0);
    }

    #[test]
    fn depth_and_bytes_are_bounded_oldest_first() {
        let mut history = History::new(10, 3);
        let a = Path::new("/p/a");
        for i in 0..5u8 {
            history.record(a, Some(vec![i]));
        }
        assert_eq!(history.pop(a), Some(Some(vec![4])));
        assert_eq!(history.pop(a), Some(Some(vec![3])));
        assert_eq!(history.pop(a), Some(Some(vec![2])));
        assert_eq!(history.pop(a), None, "depth 3 keeps three steps");

        let b = Path::new("/p/b");
        history.record(a, Some(vec![0; 6]));
        history.record(b, Some(vec![0; 6]));
        assert!(history.bytes() <= 10);
        assert_eq!(history.pop(a), None, "the oldest step was evicted for bytes");
        assert_eq!(history.pop(b), Some(Some(vec![0; 6])));
        assert!(
            !history.record(a, Some(vec![0; 11])),
            "a step over the budget is not kept"
        );
    }
}
