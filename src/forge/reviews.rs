//! Review threads on a change: the inline comments of a review (GitHub)
//! or the diff discussions of a merge request (GitLab), each answered and
//! resolved by the follow-up run that addressed it.

use super::Comment;

/// One thread of a change's review.
#[derive(Debug, Clone, PartialEq)]
pub struct ReviewThread {
    /// The forge's id for it: GitHub's thread node id (`PRRT_…`), GitLab's
    /// discussion id.
    pub id: String,
    pub resolved: bool,
    /// Its comments, oldest first; the first opens it (on a line of the
    /// diff, or on the change as a whole for a GitLab discussion).
    pub comments: Vec<Comment>,
}

impl ReviewThread {
    /// Whether the thread waits for forgehand: open, and its last word is
    /// someone else's.
    pub fn awaits(&self, login: &str) -> bool {
        !self.resolved
            && self
                .comments
                .last()
                .is_some_and(|c| !c.author.eq_ignore_ascii_case(login))
    }
}
