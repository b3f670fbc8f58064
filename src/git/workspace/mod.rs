//! The task's git work on the host. The trusted clone (made with the token,
//! pushed from) never runs anything the model wrote: the model's result
//! comes out of the sandbox as a tar stream read as data into a bare
//! quarantine repository forgehand makes (`git::untrusted`); only its
//! objects and the task branch are taken, and the commits are fetched from
//! there. Nothing in a model-edited `.git` (config, worktree, alternates,
//! hooks, links) can reach a host file or the credential.

use crate::git::history_pack::{self, HistoryPack};
use crate::git::mirror::{Fetched, Mirrors};
use crate::git::{self, shallow, Credentials, GitError};
use git2::{Delta, Oid, Repository};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

mod lfs;
mod withheld;
pub use withheld::Withheld;

#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("cannot prepare the work folder {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the result is not on the task branch `{branch}` (the sandbox's HEAD is {head}); the model must commit on `{branch}`")]
    WrongBranch { branch: String, head: String },
    #[error("the result does not contain the branch's starting point {base}; it was reset or rewritten instead of built on top")]
    NotDescendant { base: String },
    #[error("the change touches only protected paths: {}; an operator may allow them with delivery.allow_protected_paths", paths.join(", "))]
    Protected { paths: Vec<String> },
    #[error("the forge refuses the change's only files ({}) without {permission}; give forgehand's token that permission, or make the change by hand", paths.join(", "))]
    Refused { paths: Vec<String>, permission: String },
    #[error(transparent)]
    Withhold(#[from] crate::git::withhold::WithholdError),
    #[error(transparent)]
    Untrusted(#[from] git::untrusted::UntrustedError),
    #[error("cannot add the co-author or the signature to the task's commits: {0}")]
    Attribution(#[from] git::attribution::AttributionError),
    #[error("Git LFS: {0}")]
    Lfs(#[from] git::lfs::LfsError),
}

impl DeliveryError {
    /// The quarantine's refusal, with a HEAD on another branch said as
    /// the model's mistake.
    pub fn from_untrusted(err: git::untrusted::UntrustedError, branch: &str) -> DeliveryError {
        match err {
            git::untrusted::UntrustedError::OtherHead { head } => DeliveryError::WrongBranch {
                branch: branch.to_owned(),
                head,
            },
            other => DeliveryError::Untrusted(other),
        }
    }
}

/// What the model's work amounts to.
#[derive(Debug, Clone, PartialEq)]
pub struct Collected {
    pub head: Oid,
    pub commits: usize,
    pub files: Vec<String>,
    /// Other branches the model created or moved (not pushed).
    pub other_branches: Vec<String>,
    /// The protected files left out of the commits, with their diff.
    pub withheld: Option<Withheld>,
}

pub struct Workspace {
    pub root: PathBuf,
    pub clone_url: String,
    pub branch: String,
    /// The repository's default branch: what the task branch may hold
    /// that forgehand trusts (settings, `.lfsconfig`, `.gitmodules`).
    default_branch: String,
    /// Where the branch stood when the sandbox got it (moves to the new
    /// upstream after a rebase request).
    pub base: Oid,
    /// Where the remote's copy of the branch was when last seen (`None`:
    /// it did not exist): a push goes ahead only while it is still there.
    remote_head: Option<Oid>,
    mirrors: Mirrors,
    /// The mirror's shallow edge, which the work tree shares.
    shallow: Vec<Oid>,
    repo: Repository,
    /// The task's commits as the sandbox made them, to the ids they were
    /// pushed as (with the co-author and signature): a later round in the
    /// same sandbox builds on the originals, and is pushed on the rewritten.
    rewritten: HashMap<Oid, Oid>,
    /// Git LFS for this task, when the operator enables it.
    lfs: Option<lfs::TaskLfs>,
    /// The last result taken from the sandbox, before files were left out
    /// of it, and the files left out.
    taken: Option<(Oid, Vec<String>)>,
}

/// The branches a task needs from the forge.
#[derive(Debug, Clone)]
pub struct Branches {
    /// The branch a new task branch starts from (a PR's target).
    pub base: String,
    /// The repository's default branch (settings are read from it).
    pub default: String,
    /// The task branch (an existing PR's branch, or a new one).
    pub task: String,
}

impl Workspace {
    /// Brings `clone_url`'s branches up to date in its mirror and makes a
    /// work tree at `<root>/repo` that borrows the mirror's objects
    /// (read-only) and checks out the task branch: the remote's copy of it
    /// when it exists (an earlier attempt or an existing PR), else a new
    /// branch at the base.
    pub fn prepare(
        root: &Path,
        clone_url: &str,
        mirrors: &Mirrors,
        branches: &Branches,
        credentials: &Credentials,
        author: (&str, &str),
    ) -> Result<Workspace, DeliveryError> {
        let io = |source| DeliveryError::Io {
            path: root.to_owned(),
            source,
        };
        if root.exists() {
            std::fs::remove_dir_all(root).map_err(io)?;
        }
        std::fs::create_dir_all(root).map_err(io)?;
        let mut wanted = vec![
            branches.base.as_str(),
            branches.default.as_str(),
            branches.task.as_str(),
        ];
        wanted.sort_unstable();
        wanted.dedup();
        let fetched = mirrors.fetch(clone_url, &wanted, Some(credentials))?;
        let Some(&base_tip) = fetched.tips.get(&branches.base) else {
            return Err(DeliveryError::Git(GitError::Failed {
                action: format!("find the branch `{}` on the forge", branches.base),
                detail: "the forge does not have it".into(),
            }));
        };
        let repo = borrowing_repository(&root.join("repo"), &fetched).map_err(io)?;
        let remote_head = start_task_branch(&repo, &fetched, branches, base_tip)?;
        set_identity(&repo, author)?;
        let base = head_oid(&repo)?;
        Ok(Workspace {
            root: root.to_owned(),
            clone_url: clone_url.to_owned(),
            branch: branches.task.clone(),
            default_branch: branches.default.clone(),
            base,
            remote_head,
            mirrors: mirrors.clone(),
            shallow: fetched.shallow.clone(),
            repo,
            rewritten: HashMap::new(),
            lfs: None,
            taken: None,
        })
    }

    /// The files at `paths` as the remote's `base` branch has them (never
    /// the task branch, which the model or an outsider may have written).
    /// Missing files, folders and files over 1 MiB are left out.
    pub fn read_base(
        &self,
        base: &str,
        paths: &[String],
    ) -> Result<BTreeMap<String, Vec<u8>>, DeliveryError> {
        let tree = self.base_tree(base)?;
        let mut out = BTreeMap::new();
        for path in paths {
            let Ok(entry) = tree.get_path(Path::new(path)) else {
                continue;
            };
            let Ok(blob) = self.repo.find_blob(entry.id()) else {
                continue;
            };
            if blob.size() <= 1 << 20 {
                out.insert(path.clone(), blob.content().to_vec());
            }
        }
        Ok(out)
    }

    /// Every path on the remote's `base` branch whose file name is `name`.
    pub fn base_paths_named(&self, base: &str, name: &str) -> Result<Vec<String>, DeliveryError> {
        let tree = self.base_tree(base)?;
        let mut found = Vec::new();
        tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
            if entry.kind() == Some(git2::ObjectType::Blob) && entry.name().ok() == Some(name) {
                found.push(format!("{dir}{name}"));
            }
            git2::TreeWalkResult::Ok
        })
        .map_err(|e| failed("list the base branch's files", e))?;
        Ok(found)
    }

    fn base_tree(&self, base: &str) -> Result<git2::Tree<'_>, DeliveryError> {
        let oid = self
            .repo
            .refname_to_id(&format!("refs/remotes/origin/{base}"))
            .map_err(|e| failed(&format!("find the base branch `{base}`"), e))?;
        self.repo
            .find_commit(oid)
            .and_then(|c| c.tree())
            .map_err(|e| failed("read the base branch", e))
    }

    /// The default branch's last commit as the forge has it.
    pub fn default_tip(&self) -> Result<Oid, DeliveryError> {
        self.repo
            .refname_to_id(&format!("refs/remotes/origin/{}", self.default_branch))
            .map_err(|e| failed(&format!("find the default branch `{}`", self.default_branch), e))
    }

    /// Whether the checkout holds nothing but the default branch's history
    /// (its tip or a commit below it): no commit the model, an earlier
    /// run or a change's author wrote. A history the shallow mirror cuts
    /// off counts as not (nothing is trusted on a guess).
    pub fn checkout_is_default_history(&self) -> bool {
        let Ok(tip) = self.default_tip() else {
            return false;
        };
        tip == self.base || self.repo.graph_descendant_of(tip, self.base).unwrap_or(false)
    }

    /// The base branch's last commit, and whether its tree configures CI
    /// (`.github/workflows/` or `.gitlab-ci.yml`).
    pub fn base_ci(&self, base: &str) -> Result<(Oid, bool), DeliveryError> {
        let oid = self
            .repo
            .refname_to_id(&format!("refs/remotes/origin/{base}"))
            .map_err(|e| failed(&format!("find the base branch `{base}`"), e))?;
        let tree = self.base_tree(base)?;
        let configured = [".github/workflows", ".gitlab-ci.yml"]
            .iter()
            .any(|path| tree.get_path(Path::new(path)).is_ok());
        Ok((oid, configured))
    }

    /// The commit the task branch points at here (what a push sends).
    pub fn branch_head(&self) -> Result<Oid, GitError> {
        self.repo
            .refname_to_id(&format!("refs/heads/{}", self.branch))
            .map_err(|e| GitError::failed("read the task branch", e))
    }

    /// The commit last pushed to the task branch, if one was.
    pub fn pushed_head(&self) -> Option<Oid> {
        self.remote_head
    }

    /// The checkout copied into the sandbox.
    pub fn checkout_dir(&self) -> PathBuf {
        self.root.join("repo")
    }

    /// The object folders a quarantine reads the repository from: the
    /// workspace's own and the mirror's (never written through it).
    pub fn object_dirs(&self) -> Vec<PathBuf> {
        let own = self.repo.path().join("objects");
        let mirror = self.mirrors.dir_for(&self.clone_url).join("objects");
        vec![own, mirror]
    }

    /// Where round `round` quarantines what comes out of the sandbox.
    pub fn quarantine_dir(&self, round: u32) -> PathBuf {
        self.root.join(format!("out-{round}.quarantine.git"))
    }

    /// Takes the model's work from the quarantine repository at
    /// `quarantine_dir` (made by `git::untrusted::take` from what the
    /// sandbox sent): fetches the task branch into the trusted clone,
    /// checks it, writes its new commits again with `attribution`, and
    /// moves the local branch to them. `None`: the model changed nothing.
    /// `sandbox_branches` are the sandbox's other branches, of which those
    /// the model created or moved are returned.
    pub fn collect(
        &mut self,
        quarantine_dir: &Path,
        sandbox_branches: &[(String, Oid)],
        protected: &[String],
        attribution: &git::attribution::Attribution,
    ) -> Result<Option<Collected>, DeliveryError> {
        let result_ref = "refs/forgehand/result";
        let source = quarantine_dir.to_string_lossy().into_owned();
        git::fetch(
            &self.repo,
            &source,
            &[&format!("+refs/heads/{}:{result_ref}", self.branch)],
            None,
        )?;
        // libgit2 rewrites the shallow edge from what that fetch negotiated
        // (none): the mirror's is put back.
        self.set_shallow(&self.shallow.clone())?;
        let result = self
            .repo
            .refname_to_id(result_ref)
            .map_err(|e| failed("read the fetched result", e))?;
        if result == self.base {
            return Ok(None);
        }
        let result = self.lfs_pointers(result)?;
        if result == self.base {
            return Ok(None);
        }
        let (files, touched) = self.check_result(result, protected)?;
        let (kept, withheld) = self.leave_out(result, touched)?;
        if kept == self.base {
            return Err(DeliveryError::Protected {
                paths: withheld.map(|w| w.paths).unwrap_or_default(),
            });
        }
        let files: Vec<String> = files
            .into_iter()
            .filter(|f| withheld.as_ref().is_none_or(|w| !w.paths.contains(f)))
            .collect();
        let commits = self.commits_since_base(kept)?;
        let result = self.take_as_branch(kept, attribution)?;
        let other_branches = sandbox_branches
            .iter()
            .filter(|(name, tip)| self.repo.refname_to_id(&format!("refs/heads/{name}")).ok() != Some(*tip))
            .map(|(name, _)| name.clone())
            .collect();
        Ok(Some(Collected {
            head: result,
            commits,
            files,
            other_branches,
            withheld,
        }))
    }

    /// Writes `result`'s commits again with `attribution` and moves the
    /// task branch to them; the new head.
    fn take_as_branch(
        &mut self,
        result: Oid,
        attribution: &git::attribution::Attribution,
    ) -> Result<Oid, DeliveryError> {
        let result =
            git::attribution::rewrite(&self.repo, (self.base, result), attribution, &mut self.rewritten)?;
        // libgit2 will not force-move the checked-out branch: detach HEAD
        // first (the trusted clone's working tree is never used again).
        self.repo
            .set_head_detached(result)
            .map_err(|e| failed("detach HEAD", e))?;
        self.repo
            .reference(
                &format!("refs/heads/{}", self.branch),
                result,
                true,
                "forgehand: take the sandbox's result",
            )
            .map_err(|e| failed("move the task branch", e))?;
        Ok(result)
    }

    fn commits_since_base(&self, head: Oid) -> Result<usize, DeliveryError> {
        let (commits, _) = self
            .repo
            .graph_ahead_behind(head, self.base)
            .map_err(|e| failed("count the commits", e))?;
        Ok(commits)
    }

    /// Brings a checkpoint's `commit` from the quarantine at
    /// `quarantine_dir` (made by `git::untrusted::take_commit`, whose
    /// history was checked there) into the trusted clone, under the same
    /// private ref; never pushed. It must build on the base. The objects
    /// are copied one by one from the commits since the base: a fetch into
    /// the shallow clone would stop at the mirror's edge.
    pub fn take_checkpoint(&mut self, quarantine_dir: &Path, commit: Oid) -> Result<(), DeliveryError> {
        let quarantine = Repository::open_bare(quarantine_dir)
            .map_err(|e| failed("open the checkpoint's quarantine", e))?;
        // Checked in the quarantine first: a refused checkpoint leaves
        // nothing in the trusted clone.
        let descends = quarantine
            .graph_descendant_of(commit, self.base)
            .map_err(|e| failed("compare the checkpoint with its base", e))?;
        if !descends {
            return Err(DeliveryError::NotDescendant {
                base: self.base.to_string(),
            });
        }
        let from = quarantine
            .odb()
            .map_err(|e| failed("read the checkpoint's objects", e))?;
        let into = self
            .repo
            .odb()
            .map_err(|e| failed("open the work tree's objects", e))?;
        let walk_failed = |e| failed("walk the checkpoint", e);
        let mut walk = quarantine.revwalk().map_err(walk_failed)?;
        walk.push(commit).map_err(walk_failed)?;
        for known in self.history_tips() {
            walk.hide(known).map_err(walk_failed)?;
        }
        for oid in walk {
            let oid = oid.map_err(walk_failed)?;
            let tree = quarantine
                .find_commit(oid)
                .map_err(|e| failed("read a checkpoint commit", e))?
                .tree_id();
            copy_tree(&quarantine, &into, tree)?;
            copy_object(&from, &into, oid)?;
        }
        self.repo
            .reference(
                git::untrusted::CHECKPOINT_REF,
                commit,
                true,
                "forgehand: checkpoint",
            )
            .map_err(|e| failed("keep the checkpoint", e))?;
        Ok(())
    }

    /// The files `result` changes since the base, and those of them that
    /// are protected: it must build on the base.
    fn check_result(
        &self,
        result: Oid,
        protected: &[String],
    ) -> Result<(Vec<String>, Vec<String>), DeliveryError> {
        let descends = self
            .repo
            .graph_descendant_of(result, self.base)
            .map_err(|e| failed("compare the result with its base", e))?;
        if !descends {
            return Err(DeliveryError::NotDescendant {
                base: self.base.to_string(),
            });
        }
        let files = changed_files(&self.repo, self.base, result)?;
        let touched: Vec<String> =
            crate::git::withhold::touched_by_any_commit(&self.repo, (self.base, result))?
                .into_iter()
                .filter(|f| is_protected(f, protected))
                .collect();
        Ok((files, touched))
    }

    /// Pushes the task branch; given up when `deadline` (the claim's
    /// validity, with replicas) passes before the push is sent, and refused
    /// when the remote branch is no longer where this task last saw it.
    pub fn push(
        &mut self,
        credentials: &Credentials,
        deadline: Option<std::time::Instant>,
    ) -> Result<(), GitError> {
        let head = self
            .repo
            .refname_to_id(&format!("refs/heads/{}", self.branch))
            .map_err(|e| GitError::failed("read the task branch", e))?;
        let expected = match self.remote_head {
            Some(oid) => git::BranchAt::Commit(oid),
            None => git::BranchAt::Missing,
        };
        match self.push_once(credentials, expected, deadline) {
            // libgit2 walks a few commits below what the forge has to find
            // what to send, and knows no shallow edge: once, fetch the
            // whole history of the branches and push again (nothing was
            // sent).
            Err(GitError::Failed { detail, .. }) if is_missing_object(&detail) && self.repo.is_shallow() => {
                tracing::info!(
                    branch = %self.branch,
                    "the push needs history below the mirror's shallow edge ({detail}); fetching the whole history once"
                );
                self.unshallow(credentials)?;
                self.push_once(credentials, expected, deadline)?;
            }
            other => other?,
        }
        self.remote_head = Some(head);
        Ok(())
    }

    /// Writes the work tree's shallow edge (the mirror's) and re-opens it,
    /// so libgit2 reads it.
    fn set_shallow(&mut self, edge: &[Oid]) -> Result<(), GitError> {
        let git_dir = self.repo.path().to_owned();
        shallow::write(&git_dir, edge).map_err(|e| GitError::Failed {
            action: "write the work tree's shallow edge".into(),
            detail: e.to_string(),
        })?;
        self.repo = Repository::open(&git_dir).map_err(|e| GitError::failed("re-open the work tree", e))?;
        self.shallow = edge.to_vec();
        Ok(())
    }

    fn push_once(
        &self,
        credentials: &Credentials,
        expected: git::BranchAt,
        deadline: Option<std::time::Instant>,
    ) -> Result<(), GitError> {
        git::push_before(
            &self.repo,
            &self.clone_url,
            (&self.branch, &self.branch),
            Some(credentials),
            expected,
            deadline,
        )
    }

    /// Fetches the whole history of the forge's branches this workspace
    /// knows into the mirror, and drops the work tree's shallow edge.
    fn unshallow(&mut self, credentials: &Credentials) -> Result<(), GitError> {
        let names: Vec<String> = self.remote_branches().into_iter().map(|(name, _)| name).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let fetched = self
            .mirrors
            .whole_history()
            .fetch(&self.clone_url, &names, Some(credentials))?;
        self.set_shallow(&fetched.shallow)
    }

    /// Fetches the moved remote branch (into the mirror); it becomes the
    /// new base the model must build on. Returns its commit.
    pub fn fetch_upstream(&mut self, credentials: &Credentials) -> Result<Oid, DeliveryError> {
        let fetched = self
            .mirrors
            .fetch(&self.clone_url, &[&self.branch], Some(credentials))?;
        let Some(&upstream) = fetched.tips.get(&self.branch) else {
            return Err(DeliveryError::Git(GitError::Rejected {
                refname: format!("refs/heads/{}", self.branch),
                reason: "the branch was deleted on the forge meanwhile".into(),
            }));
        };
        // The mirror's edge may have moved with the fetch.
        self.set_shallow(&fetched.shallow)?;
        self.repo
            .reference(
                &format!("refs/remotes/origin/{}", self.branch),
                upstream,
                true,
                "forgehand: the moved upstream",
            )
            .map_err(|e| failed("record the moved upstream", e))?;
        self.base = upstream;
        self.remote_head = Some(upstream);
        Ok(upstream)
    }

    /// Packs the history the sandbox gets (`depth` commits of the task
    /// branch and the remote branches, newest first) into `<root>/<name>`.
    pub fn history_pack(
        &self,
        name: &str,
        (tips, has): (&[Oid], &[Oid]),
        depth: Option<u32>,
    ) -> Result<HistoryPack, DeliveryError> {
        let into = self.root.join(name);
        Ok(history_pack::write(&self.repo, (tips, has), depth, &into)?)
    }

    /// The job that packs the history the sandbox starts with (`depth`
    /// commits of the task branch and the remote branches), once per set
    /// of tips, kept beside the mirror. It runs on a repository handle of
    /// its own, so the task's other git work goes on beside it.
    pub fn start_history(
        &self,
        depth: Option<u32>,
    ) -> impl FnOnce() -> Result<HistoryPack, DeliveryError> + Send + 'static {
        let cache = self.mirrors.dir_for(&self.clone_url).join("forgehand-history");
        let (tips, dir) = (self.history_tips(), self.checkout_dir());
        move || {
            let repo = Repository::open(&dir).map_err(|e| failed("open the work tree", e))?;
            Ok(history_pack::cached(&repo, &tips, depth, &cache)?)
        }
    }

    /// Whether the task branch's tip holds a file `name` at its top level.
    pub fn head_has_file(&self, name: &str) -> bool {
        let Ok(tree) = self.repo.find_commit(self.base).and_then(|c| c.tree()) else {
            return false;
        };
        tree.get_name(name)
            .is_some_and(|entry| entry.kind() == Some(git2::ObjectType::Blob))
    }

    /// Writes the files of the work tree at `dir` (HEAD, the task branch),
    /// on a handle of its own so the task's other git work goes on beside
    /// it. Stops early once `cancel` is set: the task no longer wants them.
    pub fn check_out(dir: &Path, cancel: &std::sync::atomic::AtomicBool) -> Result<(), DeliveryError> {
        let started = std::time::Instant::now();
        let repo = Repository::open(dir).map_err(|e| failed("open the work tree", e))?;
        let mut options = git2::build::CheckoutBuilder::new();
        options
            .force()
            .notify_on(git2::CheckoutNotificationType::UPDATED)
            .notify(|_, _, _, _, _| !cancel.load(std::sync::atomic::Ordering::Relaxed));
        repo.checkout_head(Some(&mut options))
            .map_err(|e| failed("check out the branch", e))?;
        tracing::debug!(
            ms = started.elapsed().as_millis() as u64,
            "checked out the work tree"
        );
        Ok(())
    }

    /// The task branch's tip and every remote branch's, for the history pack.
    pub fn history_tips(&self) -> Vec<Oid> {
        let mut tips = vec![self.base];
        tips.extend(self.remote_branches().into_iter().map(|(_, tip)| tip));
        tips.dedup();
        tips
    }

    /// The forge's branches this work tree knows (`origin/*`), with their tips.
    fn remote_branches(&self) -> Vec<(String, Oid)> {
        let Ok(refs) = self.repo.references_glob("refs/remotes/origin/*") else {
            return Vec::new();
        };
        refs.flatten()
            .filter_map(|r| {
                let name = r.name().ok()?.strip_prefix("refs/remotes/origin/")?.to_owned();
                Some((name, r.target()?))
            })
            .collect()
    }
}

/// Records the mirror's branches as `origin/*` in the work tree's
/// repository and points HEAD at the task branch: at the remote's copy
/// of it when there is one (returned), else at `base_tip`.
fn start_task_branch(
    repo: &Repository,
    fetched: &Fetched,
    branches: &Branches,
    base_tip: Oid,
) -> Result<Option<Oid>, DeliveryError> {
    for (name, oid) in &fetched.tips {
        repo.reference(
            &format!("refs/remotes/origin/{name}"),
            *oid,
            true,
            "forgehand: from the mirror",
        )
        .map_err(|e| failed("record a remote branch", e))?;
    }
    let remote_head = fetched.tips.get(&branches.task).copied();
    let start = repo
        .find_commit(remote_head.unwrap_or(base_tip))
        .map_err(|e| failed("read the branch", e))?;
    repo.branch(&branches.task, &start, true)
        .map_err(|e| failed("create the branch", e))?;
    // HEAD names the task branch; its files are written by `check_out`,
    // beside the rest of the task's start.
    repo.set_head(&format!("refs/heads/{}", branches.task))
        .map_err(|e| failed("check out the branch", e))?;
    Ok(remote_head)
}

/// The commit author (`name`, `email`) and what git run by the model in
/// the sandbox must not wait for.
fn set_identity(repo: &Repository, (name, email): (&str, &str)) -> Result<(), DeliveryError> {
    let mut config = repo
        .config()
        .map_err(|e| failed("open the repository config", e))?;
    for (key, value) in [
        ("user.name", name),
        ("user.email", email),
        // No terminal in the sandbox: `git rebase --continue` must not wait for an editor.
        ("core.editor", "true"),
        ("rebase.autoStash", "true"),
    ] {
        config
            .set_str(key, value)
            .map_err(|e| failed("write the repository config", e))?;
    }
    Ok(())
}

/// A repository at `dir` (its work tree) whose object store borrows the
/// mirror's (alternates) and shares its shallow edge; what it writes (the
/// task's commits, the fetched result) stays in its own store.
fn borrowing_repository(dir: &Path, fetched: &Fetched) -> std::io::Result<Repository> {
    let repo = Repository::init(dir).map_err(std::io::Error::other)?;
    let info = repo.path().join("objects").join("info");
    std::fs::create_dir_all(&info)?;
    std::fs::write(
        info.join("alternates"),
        format!("{}\n", fetched.objects_dir().display()),
    )?;
    shallow::write(repo.path(), &fetched.shallow)?;
    // Re-opened so libgit2 reads the alternates and the shallow edge.
    Repository::open(dir).map_err(std::io::Error::other)
}

/// libgit2's words for an object the repository does not hold.
fn is_missing_object(detail: &str) -> bool {
    detail.contains("object not found")
}

fn head_oid(repo: &Repository) -> Result<Oid, DeliveryError> {
    repo.head()
        .and_then(|h| h.peel_to_commit())
        .map(|c| c.id())
        .map_err(|e| failed("read HEAD", e))
}

fn failed(action: &str, err: git2::Error) -> DeliveryError {
    DeliveryError::Git(GitError::Failed {
        action: action.to_owned(),
        detail: err.message().to_owned(),
    })
}

pub(super) fn changed_files(repo: &Repository, from: Oid, to: Oid) -> Result<Vec<String>, DeliveryError> {
    let tree = |oid: Oid| {
        repo.find_commit(oid)
            .and_then(|c| c.tree())
            .map_err(|e| failed("read a tree", e))
    };
    let (old, new) = (tree(from)?, tree(to)?);
    let diff = repo
        .diff_tree_to_tree(Some(&old), Some(&new), None)
        .map_err(|e| failed("diff the result", e))?;
    let mut files = Vec::new();
    for delta in diff.deltas() {
        for file in [delta.old_file(), delta.new_file()] {
            if delta.status() == Delta::Added && file.id().is_zero() {
                continue;
            }
            if let Some(path) = file.path().map(|p| p.to_string_lossy().into_owned()) {
                if !files.contains(&path) {
                    files.push(path);
                }
            }
        }
    }
    Ok(files)
}

/// `.github/workflows/` protects the folder; `.gitlab-ci.yml` the file.
pub fn is_protected(path: &str, protected: &[String]) -> bool {
    protected.iter().any(|p| {
        if p.ends_with('/') {
            path.starts_with(p.as_str())
        } else {
            path == p || path.starts_with(&format!("{p}/"))
        }
    })
}

/// Copies object `oid` from `from` to `into` unless `into` has it.
fn copy_object(from: &git2::Odb<'_>, into: &git2::Odb<'_>, oid: Oid) -> Result<bool, DeliveryError> {
    if into.exists(oid) {
        return Ok(false);
    }
    let object = from
        .read(oid)
        .map_err(|e| failed("read a checkpoint object", e))?;
    into.write(object.kind(), object.data())
        .map_err(|e| failed("write a checkpoint object", e))?;
    Ok(true)
}

/// Copies tree `oid` and what it holds (what `into` lacks) from `repo`.
fn copy_tree(repo: &Repository, into: &git2::Odb<'_>, oid: Oid) -> Result<(), DeliveryError> {
    let from = repo
        .odb()
        .map_err(|e| failed("read the checkpoint's objects", e))?;
    let mut pending = vec![oid];
    while let Some(tree) = pending.pop() {
        // A tree `into` has, it has whole.
        if !copy_object(&from, into, tree)? {
            continue;
        }
        let tree = repo
            .find_tree(tree)
            .map_err(|e| failed("read a checkpoint tree", e))?;
        for entry in tree.iter() {
            match entry.kind() {
                Some(git2::ObjectType::Tree) => pending.push(entry.id()),
                Some(git2::ObjectType::Blob) => {
                    copy_object(&from, into, entry.id())?;
                }
                // Gitlinks name commits of other repositories.
                _ => {}
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_paths_match_folders_and_files() {
        let protected = vec![".github/workflows/".to_owned(), ".gitlab-ci.yml".to_owned()];
        assert!(is_protected(".github/workflows/ci.yml", &protected));
        assert!(is_protected(".gitlab-ci.yml", &protected));
        assert!(!is_protected(".github/CODEOWNERS", &protected));
        assert!(!is_protected("src/.gitlab-ci.yml.txt", &protected));
    }
}
