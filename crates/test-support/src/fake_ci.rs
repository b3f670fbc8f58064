//! A fake CI shared by the fake forges: a script a test gives decides,
//! for each commit pushed, which jobs run and how they end (it may read
//! the commit's files from the bare repository). Jobs move one state per
//! look (queued, running, completed), as real ones take time, or run for
//! a set time, and can be run again.

use std::path::Path;
use std::sync::Arc;

/// How a job ends, per attempt.
#[derive(Clone, Debug, PartialEq)]
pub enum JobEnd {
    Pass,
    /// Fails with this log.
    Fail(String),
    /// Fails with this log on its first attempt, passes when re-run.
    Flaky(String),
    /// Never leaves the queue (a workflow waiting for approval).
    NeverStarts,
    /// Runs this long from the first look at its commit, then passes.
    PassAfter(std::time::Duration),
}

/// What the script sees of a pushed commit.
pub struct Commit<'a> {
    pub sha: &'a str,
    bare: Option<&'a Path>,
}

impl Commit<'_> {
    /// A file's text at the commit, if it has one.
    pub fn file(&self, path: &str) -> Option<String> {
        let repo = git2::Repository::open_bare(self.bare?).ok()?;
        let oid = git2::Oid::from_str(self.sha).ok()?;
        let tree = repo.find_commit(oid).ok()?.tree().ok()?;
        let blob = repo.find_blob(tree.get_path(Path::new(path)).ok()?.id()).ok()?;
        Some(String::from_utf8_lossy(blob.content()).into_owned())
    }
}

/// The jobs (name, end) a commit runs; none: the commit has no CI.
pub type CiScript = Arc<dyn Fn(&Commit<'_>) -> Vec<(String, JobEnd)> + Send + Sync>;

#[derive(Clone, Debug)]
pub struct FakeJob {
    pub id: u64,
    pub sha: String,
    pub name: String,
    pub end: JobEnd,
    /// 1, then 2 after a re-run.
    pub attempt: u32,
    /// Looks left before it completes: 2 (queued, in progress).
    pub looks_left: u32,
    pub completed: Option<bool>,
    /// When the job was made (its commit first looked at) or re-run.
    pub since: std::time::Instant,
}

impl FakeJob {
    /// GitHub's (`status`, `conclusion`) of the job now.
    pub fn status(&self) -> (&'static str, Option<&'static str>) {
        match (self.completed, self.looks_left) {
            (Some(true), _) => ("completed", Some("success")),
            (Some(false), _) => ("completed", Some("failure")),
            (None, 2..) => ("queued", None),
            (None, _) => ("in_progress", None),
        }
    }

    pub fn log(&self) -> String {
        match (&self.end, self.completed) {
            (JobEnd::Fail(log), Some(false)) | (JobEnd::Flaky(log), Some(false)) => log.clone(),
            _ => format!("Run {}\nall good\n", self.name),
        }
    }

    /// Runs the job again: a new attempt, queued.
    pub fn rerun(&mut self) {
        self.attempt += 1;
        self.looks_left = 2;
        self.completed = None;
        self.since = std::time::Instant::now();
    }

    /// One more look: the job moves on, and completes per its end.
    pub fn advance(&mut self) -> bool {
        if self.completed.is_some() || self.end == JobEnd::NeverStarts {
            return false;
        }
        self.looks_left = self.looks_left.saturating_sub(1);
        if let JobEnd::PassAfter(runs) = self.end {
            // Running from its first look until its time is up.
            self.looks_left = self.looks_left.max(1);
            if self.since.elapsed() < runs {
                return false;
            }
        } else if self.looks_left > 0 {
            return false;
        }
        self.completed = Some(match &self.end {
            JobEnd::Pass | JobEnd::PassAfter(_) => true,
            JobEnd::Fail(_) => false,
            JobEnd::Flaky(_) => self.attempt > 1,
            JobEnd::NeverStarts => return false,
        });
        true
    }
}

/// The commit's jobs, made by `script` at the first look (ids from
/// `next_id`); `bare` is the repository the script may read.
pub fn jobs_of<'j>(
    jobs: &'j mut Vec<FakeJob>,
    next_id: &mut u64,
    script: Option<&CiScript>,
    bare: Option<&Path>,
    sha: &str,
) -> Vec<&'j mut FakeJob> {
    if !jobs.iter().any(|j| j.sha == sha) {
        if let Some(script) = script {
            for (name, end) in script(&Commit { sha, bare }) {
                *next_id += 1;
                jobs.push(FakeJob {
                    id: *next_id,
                    sha: sha.to_owned(),
                    name,
                    end,
                    attempt: 1,
                    looks_left: 2,
                    completed: None,
                    since: std::time::Instant::now(),
                });
            }
        }
    }
    jobs.iter_mut().filter(|j| j.sha == sha).collect()
}
