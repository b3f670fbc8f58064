//! Git on the host, with git2: clone, branch, commit, fetch and push. The
//! forge token is handed to libgit2 only through a credential callback (never
//! in a URL, never in `.git/config`), so the working tree that is later
//! copied into a sandbox carries no credential. These calls block; async
//! callers run them with `spawn_blocking`.

pub mod attribution;
pub mod history_pack;
pub mod lfs;
pub mod mirror;
pub mod shallow;
pub mod signing;
pub mod submodules;
pub mod untrusted;
pub mod withhold;
pub mod workspace;

use crate::config::Secret;
use git2::{
    build::RepoBuilder, Cred, CredentialType, ErrorClass, ErrorCode, FetchOptions, IndexAddOption, Oid,
    PushOptions, RemoteCallbacks, Repository, Signature,
};
use std::cell::{Cell, RefCell};
use std::path::Path;

/// Credential callbacks libgit2 may make per operation before it gives up
/// (a wrong token would otherwise be retried forever).
pub const MAX_AUTH_ATTEMPTS: u32 = 3;

/// HTTPS credentials: GitHub takes `x-access-token`, GitLab `oauth2`, with
/// the token as the password.
#[derive(Clone)]
pub struct Credentials {
    pub username: String,
    pub token: Secret,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({}, ***)", self.username)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("authentication to {url} failed ({detail}); check that the token is set and may access the repository")]
    Auth { url: String, detail: String },
    /// The push was given up before it updated anything: it could not have
    /// finished while this replica's claim on the task was valid.
    #[error("the push of {refname} was given up: it would have finished after this replica's claim on the task ran out")]
    Late { refname: String },
    /// The remote refused the update: it moved (not a fast-forward) or a
    /// server-side rule rejected it. Fetch, rebase, and push again.
    #[error("the push of {refname} was rejected: {reason}")]
    Rejected { refname: String, reason: String },
    #[error("cannot reach {url}: {detail}")]
    Network { url: String, detail: String },
    #[error("git failed to {action}: {detail}")]
    Failed { action: String, detail: String },
    /// A fetch was stopped at its byte cap (not retried: it would stop there again).
    #[error("the fetch from {url} was stopped once it passed {cap} bytes")]
    TooLarge { url: String, cap: u64 },
}

impl GitError {
    /// Whether the same operation may succeed later without a change.
    pub fn is_retryable(&self) -> bool {
        matches!(self, GitError::Network { .. })
    }

    pub(crate) fn failed(action: &str, err: git2::Error) -> GitError {
        GitError::Failed {
            action: action.to_owned(),
            detail: err.message().to_owned(),
        }
    }
}

/// Maps a libgit2 error from talking to `url`.
fn remote_error(action: &str, url: &str, err: git2::Error, auth_attempts: u32) -> GitError {
    let message = err.message().to_owned();
    let lower = message.to_ascii_lowercase();
    if err.code() == ErrorCode::Auth
        || auth_attempts > MAX_AUTH_ATTEMPTS
        || lower.contains("authentication")
        || lower.contains("status code: 401")
        || lower.contains("status code: 403")
    {
        return GitError::Auth {
            url: url.to_owned(),
            detail: message,
        };
    }
    if matches!(
        err.class(),
        ErrorClass::Net | ErrorClass::Http | ErrorClass::Ssl | ErrorClass::Os
    ) {
        return GitError::Network {
            url: url.to_owned(),
            detail: message,
        };
    }
    GitError::failed(action, err)
}

/// The scheme, host and port of a URL, the part a credential belongs to.
fn origin_of(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    Some(format!(
        "{}://{}:{}",
        parsed.scheme(),
        parsed.host_str()?,
        parsed.port_or_known_default()?
    ))
}

/// Callbacks that answer credential requests at most [`MAX_AUTH_ATTEMPTS`]
/// times, and only for the origin of `remote`, the URL the operation was
/// given: a redirect or any other address never gets the token.
fn callbacks<'a>(
    credentials: Option<&'a Credentials>,
    attempts: &'a Cell<u32>,
    remote: &str,
) -> RemoteCallbacks<'a> {
    let mut callbacks = RemoteCallbacks::new();
    let expected = origin_of(remote);
    callbacks.credentials(move |asked, _user_from_url, allowed| {
        let origin = origin_of(asked);
        if origin.is_none() || origin != expected {
            return Err(git2::Error::from_str(&format!(
                "authentication refused: credentials were asked for {}, not for {}, the forge's address this operation was given; the token is sent to that address only",
                origin.as_deref().unwrap_or("an address that is not a URL"),
                expected.as_deref().unwrap_or("(none)")
            )));
        }
        attempts.set(attempts.get() + 1);
        if attempts.get() > MAX_AUTH_ATTEMPTS {
            return Err(git2::Error::from_str(
                "authentication failed: the token was refused",
            ));
        }
        match credentials {
            Some(c) if allowed.contains(CredentialType::USER_PASS_PLAINTEXT) => {
                Cred::userpass_plaintext(&c.username, c.token.expose())
            }
            Some(_) => Err(git2::Error::from_str(
                "authentication failed: the remote wants a credential type other than a token",
            )),
            None => Err(git2::Error::from_str(
                "authentication failed: no token is configured for this remote",
            )),
        }
    });
    callbacks
}

/// Clones `url` into `dest` (which must not exist or be empty), checking out
/// `branch` or the remote's default branch.
pub fn clone(
    url: &str,
    dest: &Path,
    branch: Option<&str>,
    credentials: Option<&Credentials>,
) -> Result<Repository, GitError> {
    let attempts = Cell::new(0);
    let mut fetch = FetchOptions::new();
    fetch.remote_callbacks(callbacks(credentials, &attempts, url));
    let mut builder = RepoBuilder::new();
    builder.fetch_options(fetch);
    if let Some(branch) = branch {
        builder.branch(branch);
    }
    builder
        .clone(url, dest)
        .map_err(|e| remote_error("clone", url, e, attempts.get()))
}

/// Creates `name` at HEAD (or resets it there) and checks it out.
pub fn checkout_new_branch(repo: &Repository, name: &str) -> Result<(), GitError> {
    let head = repo
        .head()
        .and_then(|h| h.peel_to_commit())
        .map_err(|e| GitError::failed("read HEAD", e))?;
    repo.branch(name, &head, true)
        .map_err(|e| GitError::failed(&format!("create branch {name}"), e))?;
    repo.set_head(&format!("refs/heads/{name}"))
        .map_err(|e| GitError::failed(&format!("check out {name}"), e))
}

/// Stages every change (new, modified and deleted files; ignored files stay
/// out) and commits it on HEAD. `None` when there was nothing to commit.
pub fn commit_all(repo: &Repository, message: &str, author: &Signature<'_>) -> Result<Option<Oid>, GitError> {
    fn fail(action: &'static str) -> impl Fn(git2::Error) -> GitError {
        move |e| GitError::failed(action, e)
    }
    let mut index = repo.index().map_err(fail("open the index"))?;
    index
        .add_all(["*"], IndexAddOption::DEFAULT, None)
        .map_err(fail("stage changes"))?;
    index.update_all(["*"], None).map_err(fail("stage deletions"))?;
    index.write().map_err(fail("write the index"))?;
    let tree_id = index.write_tree().map_err(fail("write the tree"))?;
    let parent = repo
        .head()
        .and_then(|h| h.peel_to_commit())
        .map_err(fail("read HEAD"))?;
    if parent.tree_id() == tree_id {
        return Ok(None);
    }
    let tree = repo.find_tree(tree_id).map_err(fail("read the tree"))?;
    repo.commit(Some("HEAD"), author, author, message, &tree, &[&parent])
        .map(Some)
        .map_err(fail("commit"))
}

/// Fetches `refspecs` from `url` into this repository.
pub fn fetch(
    repo: &Repository,
    url: &str,
    refspecs: &[&str],
    credentials: Option<&Credentials>,
) -> Result<(), GitError> {
    let attempts = Cell::new(0);
    let mut remote = repo
        .remote_anonymous(url)
        .map_err(|e| GitError::failed("set up the remote", e))?;
    let mut options = FetchOptions::new();
    options.remote_callbacks(callbacks(credentials, &attempts, url));
    remote
        .fetch(refspecs, Some(&mut options), None)
        .map_err(|e| remote_error("fetch", url, e, attempts.get()))
}

/// What the remote branch must hold for a push to go ahead: a
/// compare-and-swap on the ref, checked against the remote's own
/// advertisement once it is negotiated, so a push made on stale knowledge
/// (a replica that lost its claim while another pushed) is refused rather
/// than built upon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BranchAt {
    /// Whatever it holds (the fast-forward rule still applies).
    Unchecked,
    /// The branch must not exist yet.
    Missing,
    /// The branch must point at this commit.
    Commit(Oid),
}

/// Pushes `local_branch` to `remote_branch` at `url`. A rejection, whether
/// libgit2 sees it locally (not a fast-forward) or the server reports it
/// through the push status, is [`GitError::Rejected`].
pub fn push(
    repo: &Repository,
    url: &str,
    local_branch: &str,
    remote_branch: &str,
    credentials: Option<&Credentials>,
) -> Result<(), GitError> {
    push_before(
        repo,
        url,
        (local_branch, remote_branch),
        credentials,
        BranchAt::Unchecked,
        None,
    )
}

/// [`push`], given up (before any ref is updated) when `deadline` has
/// passed by the time the remote has negotiated what to send (a replica
/// whose claim on the task lapses meanwhile must not push), or when the
/// remote branch is not where `expected` says ([`GitError::Rejected`],
/// naming both commits).
pub fn push_before(
    repo: &Repository,
    url: &str,
    (local_branch, remote_branch): (&str, &str),
    credentials: Option<&Credentials>,
    expected: BranchAt,
    deadline: Option<std::time::Instant>,
) -> Result<(), GitError> {
    let attempts = Cell::new(0);
    let rejected: RefCell<Option<(String, String)>> = RefCell::new(None);
    let mut remote = repo
        .remote_anonymous(url)
        .map_err(|e| GitError::failed("set up the remote", e))?;
    let late = Cell::new(false);
    // The remote's own words (`remote: ...`): a server-side hook says there
    // why it refused, where the ref's status only says that a hook did.
    let remote_said = RefCell::new(String::new());
    let mut callbacks = callbacks(credentials, &attempts, url);
    callbacks.push_negotiation(|updates| {
        if deadline.is_some_and(|deadline| std::time::Instant::now() >= deadline) {
            late.set(true);
            return Err(git2::Error::from_str("the push's deadline has passed"));
        }
        for update in updates {
            if let Some(reason) = moved(expected, update.src()) {
                let refname = update.dst_refname().unwrap_or(remote_branch).to_owned();
                *rejected.borrow_mut() = Some((refname, reason));
                return Err(git2::Error::from_str("the remote branch moved"));
            }
        }
        Ok(())
    });
    callbacks.push_update_reference(|refname, status| {
        if let Some(reason) = status {
            *rejected.borrow_mut() = Some((refname.to_owned(), reason.to_owned()));
        }
        Ok(())
    });
    callbacks.sideband_progress(|data| {
        let mut said = remote_said.borrow_mut();
        if said.len() < REMOTE_WORDS_CAP {
            said.push_str(&String::from_utf8_lossy(data));
        }
        true
    });
    let mut options = PushOptions::new();
    options.remote_callbacks(callbacks);
    let refspec = format!("refs/heads/{local_branch}:refs/heads/{remote_branch}");
    let pushed = remote.push(&[refspec.as_str()], Some(&mut options));
    drop(options);
    if late.get() {
        return Err(GitError::Late {
            refname: format!("refs/heads/{remote_branch}"),
        });
    }
    if let Some((refname, reason)) = rejected.into_inner() {
        let reason = with_remote_refusal(reason, &remote_said.into_inner());
        return Err(GitError::Rejected { refname, reason });
    }
    match pushed {
        Ok(()) => Ok(()),
        Err(e) if e.code() == ErrorCode::NotFastForward => Err(GitError::Rejected {
            refname: format!("refs/heads/{remote_branch}"),
            reason: "the remote branch has commits this push does not contain (not a fast-forward)".into(),
        }),
        Err(e) => Err(remote_error("push", url, e, attempts.get())),
    }
}

/// How much of the remote's messages a push keeps.
const REMOTE_WORDS_CAP: usize = 8 * 1024;

/// A ref status that only says a hook declined, with the hook's own
/// refusal (`refusing to allow ...`) from the remote's messages added.
fn with_remote_refusal(reason: String, remote_said: &str) -> String {
    if reason.contains("refusing to allow") {
        return reason;
    }
    let refusal = remote_said
        .split(['\n', '\r'])
        .map(str::trim)
        .find(|line| line.starts_with("refusing to allow"));
    match refusal {
        Some(line) => format!("{reason} ({})", line.chars().take(500).collect::<String>()),
        None => reason,
    }
}

/// Why a remote branch at `found` (zero: missing) is not what `expected`
/// asks, or `None` when it is.
fn moved(expected: BranchAt, found: Oid) -> Option<String> {
    let shown = |oid: Oid| {
        if oid.is_zero() {
            "missing".to_owned()
        } else {
            format!("at {oid}")
        }
    };
    let want = match expected {
        BranchAt::Unchecked => return None,
        BranchAt::Missing => Oid::ZERO_SHA1,
        BranchAt::Commit(oid) => oid,
    };
    (want != found).then(|| {
        format!(
            "the remote branch moved: it is {}, where this task last saw it {}; someone else pushed to it meanwhile, and nothing of theirs was overwritten",
            shown(found),
            shown(want)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::with_remote_refusal;

    #[test]
    fn a_hooks_refusal_in_the_remotes_words_joins_the_refs_status() {
        let said = "Resolving deltas: 100% (1/1)\r\nrefusing to allow a Personal Access Token to create or update workflow `.github/workflows/ci.yml` without `workflow` scope\n";
        assert_eq!(
            with_remote_refusal("pre-receive hook declined".into(), said),
            "pre-receive hook declined (refusing to allow a Personal Access Token to create or update workflow `.github/workflows/ci.yml` without `workflow` scope)"
        );
        assert_eq!(
            with_remote_refusal("pre-receive hook declined".into(), "remote: no\n"),
            "pre-receive hook declined"
        );
        let github = "refusing to allow a GitHub App to create or update workflow `.github/workflows/a.yml` without `workflows` permission";
        assert_eq!(with_remote_refusal(github.into(), said), github);
    }
}
