//! What a forge remembers of work done: issues closed by a merged PR/MR,
//! and what that change did. `forgehand eval make` builds evaluation
//! instances from it.

use super::{ForgeError, Timestamp};
use async_trait::async_trait;

/// An issue closed by a merged change.
#[derive(Debug, Clone, PartialEq)]
pub struct ClosedByChange {
    pub issue: u64,
    pub title: String,
    pub body: String,
    pub closed_at: Timestamp,
    /// The PR/MR's number (GitLab: its IID).
    pub change: u64,
    /// The commit the change was made on.
    pub base_sha: String,
    /// Every file the change touched.
    pub files: Vec<ChangedFile>,
}

/// One file of a change, with its diff.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangedFile {
    pub path: String,
    /// The path before a rename.
    pub old_path: Option<String>,
    pub status: FileStatus,
    /// The hunks (`@@ ... @@` and their lines); `None` for a binary file or
    /// a diff too large for the forge to give.
    pub hunks: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileStatus {
    Added,
    Modified,
    Removed,
    Renamed,
}

impl ChangedFile {
    /// The file's diff as `git apply` takes it; `None` without hunks
    /// (a pure rename or deletion has none and needs none).
    pub fn unified(&self) -> Option<String> {
        let old = self.old_path.as_deref().unwrap_or(&self.path);
        let mut out = format!("diff --git a/{old} b/{}\n", self.path);
        let (from, to) = match self.status {
            FileStatus::Added => {
                out.push_str("new file mode 100644\n");
                ("/dev/null".to_owned(), format!("b/{}", self.path))
            }
            FileStatus::Removed => {
                out.push_str("deleted file mode 100644\n");
                (format!("a/{old}"), "/dev/null".to_owned())
            }
            FileStatus::Renamed => {
                out.push_str(&format!("rename from {old}\nrename to {}\n", self.path));
                (format!("a/{old}"), format!("b/{}", self.path))
            }
            FileStatus::Modified => (format!("a/{old}"), format!("b/{}", self.path)),
        };
        match &self.hunks {
            Some(hunks) if !hunks.trim().is_empty() => {
                out.push_str(&format!("--- {from}\n+++ {to}\n{hunks}"));
                if !hunks.ends_with('\n') {
                    out.push('\n');
                }
                Some(out)
            }
            _ if self.status == FileStatus::Renamed => Some(out),
            _ => None,
        }
    }
}

/// A forge's memory of closed issues.
#[async_trait]
pub trait History: Send + Sync {
    /// The issues of `repo` closed at or after `since` by a merged PR/MR,
    /// oldest first, each with that change.
    async fn closed_by_changes(
        &self,
        repo: &str,
        since: Timestamp,
    ) -> Result<Vec<ClosedByChange>, ForgeError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forge_file_diff_becomes_what_git_apply_takes() {
        let file = |status, hunks: Option<&str>| ChangedFile {
            path: "tests/test_a.py".into(),
            old_path: None,
            status,
            hunks: hunks.map(str::to_owned),
        };
        let added = file(FileStatus::Added, Some("@@ -0,0 +1 @@\n+x = 1"))
            .unified()
            .unwrap();
        assert_eq!(
            added,
            "diff --git a/tests/test_a.py b/tests/test_a.py\nnew file mode 100644\n--- /dev/null\n+++ b/tests/test_a.py\n@@ -0,0 +1 @@\n+x = 1\n"
        );
        let changed = file(FileStatus::Modified, Some("@@ -1 +1 @@\n-x\n+y\n"))
            .unified()
            .unwrap();
        assert!(changed.contains("--- a/tests/test_a.py\n+++ b/tests/test_a.py\n@@ -1 +1 @@\n-x\n+y\n"));
        assert!(file(FileStatus::Modified, None).unified().is_none(), "binary");
    }
}
