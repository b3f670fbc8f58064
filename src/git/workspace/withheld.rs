//! The workspace's files left out of the task's commits (the work is in
//! `task::withhold`): protected paths by the operator's setting, and files
//! the forge refused for want of a permission.

use super::{is_protected, DeliveryError, Workspace};
use crate::git::attribution::Attribution;
use crate::git::withhold;
use git2::Oid;

/// Files left out of the commits, and their diff from the base.
#[derive(Debug, Clone, PartialEq)]
pub struct Withheld {
    pub paths: Vec<String>,
    pub diff: String,
}

impl Workspace {
    /// `result` without `paths` (when there are any), remembered as the
    /// last result taken; what was left out.
    pub(super) fn leave_out(
        &mut self,
        result: Oid,
        paths: Vec<String>,
    ) -> Result<(Oid, Option<Withheld>), DeliveryError> {
        self.taken = Some((result, paths.clone()));
        if paths.is_empty() {
            return Ok((result, None));
        }
        let diff = withhold::diff_of(&self.repo, (self.base, result), &paths)?;
        let kept = withhold::without(&self.repo, (self.base, result), &paths)?;
        Ok((kept, Some(Withheld { paths, diff })))
    }

    /// Leaves out, besides what was, the last result's files under
    /// `refused` (which the forge refused), and moves the task branch to
    /// what is left. `None`: the result changes none of them (the same
    /// push would be refused again). `permission`: what would let the
    /// forge take them, for the error when nothing else is left.
    pub fn leave_out_refused(
        &mut self,
        refused: &[String],
        permission: &str,
        attribution: &Attribution,
    ) -> Result<Option<Withheld>, DeliveryError> {
        let Some((result, before)) = self.taken.clone() else {
            return Ok(None);
        };
        let files = withhold::touched_by_any_commit(&self.repo, (self.base, result))?;
        let more: Vec<String> = files
            .into_iter()
            .filter(|f| is_protected(f, refused) && !before.contains(f))
            .collect();
        if more.is_empty() {
            return Ok(None);
        }
        let mut paths = before;
        paths.extend(more.iter().cloned());
        let (kept, _) = self.leave_out(result, paths)?;
        if kept == self.base {
            return Err(DeliveryError::Refused {
                paths: more,
                permission: permission.to_owned(),
            });
        }
        self.take_as_branch(kept, attribution)?;
        let diff = withhold::diff_of(&self.repo, (self.base, result), &more)?;
        Ok(Some(Withheld { paths: more, diff }))
    }

    /// The files of the last result's commits titled `message` (what
    /// forgehand committed on the model's behalf), withheld ones aside.
    pub fn committed_as(&self, message: &str) -> Vec<String> {
        let Some((result, withheld)) = &self.taken else {
            return Vec::new();
        };
        withhold::files_of_commits_titled(&self.repo, (self.base, *result), message)
            .into_iter()
            .filter(|f| !withheld.contains(f))
            .collect()
    }
}
