//! The workspace's Git LFS steps (the work is in `git::lfs`): the
//! checkout's LFS content, the task's commits with pointers, and the
//! upload before each push.

use super::{DeliveryError, Workspace};
use crate::config::LfsConfig;
use crate::git::lfs::batch::Client;
use crate::git::lfs::checkout::{self, Fetched};
use crate::git::lfs::commit::Converted;
use crate::git::lfs::{self, Access, LfsError, LfsPaths};
use crate::git::Credentials;
use git2::Oid;
use std::path::PathBuf;
use url::Url;

/// A task's LFS state.
pub struct TaskLfs {
    access: Access,
    max_total: u64,
    converted: Converted,
}

impl Workspace {
    /// Turns Git LFS on for this task when the operator enabled it.
    pub fn use_lfs(&mut self, config: &LfsConfig, credentials: &Credentials) -> Result<(), DeliveryError> {
        if !config.enabled {
            return Ok(());
        }
        self.lfs = Some(TaskLfs {
            access: Access::new(&self.clone_url, config, credentials.clone())?,
            max_total: config.max_total_bytes,
            converted: Converted::default(),
        });
        Ok(())
    }

    /// The job that fetches the LFS files of the checkout (run after its
    /// files are written), when LFS is on and the branch has any.
    pub fn lfs_checkout_job(
        &self,
    ) -> Option<impl FnOnce() -> Result<Fetched, DeliveryError> + Send + 'static> {
        let lfs = self.lfs.as_ref()?;
        let tree = self.repo.find_commit(self.base).and_then(|c| c.tree()).ok()?;
        if !LfsPaths::of_tree(&self.repo, &tree).is_ok_and(|paths| paths.any()) {
            return None;
        }
        let (dir, endpoint) = (self.checkout_dir(), self.lfs_endpoint());
        let (access, max_total) = (lfs.access.clone(), lfs.max_total);
        Some(move || -> Result<Fetched, DeliveryError> {
            Ok(checkout::fetch_head(&dir, endpoint, &access, max_total)?)
        })
    }

    /// The LFS endpoint the default branch's `.lfsconfig` names (else the
    /// clone URL's): never the task branch's, which the model may have
    /// pushed on an earlier run, nor the sandbox's.
    fn lfs_endpoint(&self) -> Result<Url, LfsError> {
        let tree = self
            .base_tree(&self.default_branch)
            .map_err(|e| LfsError::Endpoint {
                detail: format!("the default branch's `.lfsconfig` cannot be read ({e})"),
            })?;
        checkout::endpoint_of(&self.repo, &tree, &self.clone_url)
    }

    /// `result` with the LFS files of the task's commits as pointers.
    pub(super) fn lfs_pointers(&mut self, result: Oid) -> Result<Oid, DeliveryError> {
        let Some(lfs) = self.lfs.as_mut() else {
            return Ok(result);
        };
        Ok(lfs.converted.rewrite(&self.repo, (self.base, result))?)
    }

    /// Uploads the LFS objects the task's pointers name, before the push,
    /// to the endpoint the default branch names (never the task branch's
    /// or the sandbox's `.lfsconfig`). Returns how many were sent.
    pub fn upload_lfs(&mut self) -> Result<usize, LfsError> {
        if self
            .lfs
            .as_ref()
            .is_none_or(|lfs| lfs.converted.pending.is_empty())
        {
            return Ok(0);
        }
        let endpoint = self.lfs_endpoint()?;
        let dir: PathBuf = self.repo.path().to_owned();
        let Some(lfs) = self.lfs.as_mut() else {
            return Ok(0);
        };
        let client = Client::new(endpoint, lfs.access.clone())?;
        let sent = lfs::block_on(lfs::upload::upload(&client, &dir, &lfs.converted.pending))?;
        tracing::info!(objects = lfs.converted.pending.len(), sent, endpoint = %client.endpoint(), "LFS objects uploaded before the push");
        lfs.converted.pending.clear();
        Ok(sent)
    }
}
