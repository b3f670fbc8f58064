//! Who a task's commits are by, for, and who vouches for them: before a
//! push, the commits the task made (base..head) are always written again
//! on the host. Each gets forgehand's identity as author and committer,
//! dated at the rewrite; the message loses every trailer the sandbox wrote
//! that names a person ([`claims_identity`]) and ends with a
//! `Co-authored-by:` naming the person who started the run; and, when the
//! operator gave a key, an SSH signature. Trees and order are kept. What
//! the model chose as author, committer, dates and co-authors never
//! reaches the forge: a signature would make the forge show them as
//! verified.

use super::signing::CommitSigner;
use crate::forge::ForgeKind;
use git2::{Commit, Oid, Repository, Signature, Sort};
use std::collections::HashMap;
use std::sync::Arc;

/// The person a run was started for, as a commit trailer names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoAuthor {
    pub name: String,
    pub email: String,
}

impl CoAuthor {
    /// The forge's noreply address for a user, which links the commit to
    /// their account without showing a real address: GitHub's
    /// `ID+login@users.noreply.<host>`, GitLab's `ID-username@users.noreply.<host>`.
    /// `None` without a forge (a local evaluation).
    pub fn noreply(forge: ForgeKind, web_host: &str, login: &str, id: u64) -> Option<CoAuthor> {
        let sep = match forge {
            ForgeKind::GitHub => '+',
            ForgeKind::GitLab => '-',
            ForgeKind::Local => return None,
        };
        Some(CoAuthor {
            name: login.to_owned(),
            email: format!("{id}{sep}{login}@users.noreply.{web_host}"),
        })
    }

    pub fn trailer(&self) -> String {
        format!("Co-authored-by: {} <{}>", self.name, self.email)
    }
}

/// forgehand's own name on commits: `delivery.author_name` and
/// `delivery.author_email`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    pub email: String,
}

/// What a task's commits get before they are pushed.
#[derive(Debug, Clone)]
pub struct Attribution {
    /// The author and committer of every commit pushed.
    pub identity: Identity,
    pub co_author: Option<CoAuthor>,
    pub signer: Option<Arc<CommitSigner>>,
}

#[derive(Debug, thiserror::Error)]
pub enum AttributionError {
    #[error("cannot {action}: {source}")]
    Git {
        action: &'static str,
        #[source]
        source: git2::Error,
    },
    #[error("delivery.author_name and delivery.author_email do not make a commit identity ({0}); give a plain name and an address without angle brackets or newlines")]
    Identity(git2::Error),
    #[error(transparent)]
    Sign(#[from] super::signing::SigningError),
}

fn git(action: &'static str) -> impl FnOnce(git2::Error) -> AttributionError {
    move |source| AttributionError::Git { action, source }
}

/// `message` with `trailer` as its last line: joined to a closing block of
/// trailers, else after a blank line. A message that already carries the
/// trailer (any case) is returned as it is.
pub fn with_trailer(message: &str, trailer: &str) -> String {
    let has = message
        .lines()
        .any(|line| line.trim().eq_ignore_ascii_case(trailer.trim()));
    if has {
        return message.to_owned();
    }
    let body = message.trim_end();
    if body.is_empty() {
        return format!("{trailer}\n");
    }
    let last_paragraph = body.rsplit("\n\n").next().unwrap_or(body);
    let is_trailer_block = body.contains("\n\n") && last_paragraph.lines().all(is_trailer_line);
    let gap = if is_trailer_block { "\n" } else { "\n\n" };
    format!("{body}{gap}{trailer}\n")
}

/// `Token: value`, where the token is letters, digits and dashes.
fn is_trailer_line(line: &str) -> bool {
    line.split_once(": ")
        .is_some_and(|(token, _)| is_trailer_token(token))
}

fn is_trailer_token(token: &str) -> bool {
    !token.is_empty() && token.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

/// Whether `line` is a trailer that names a person as having a part in the
/// commit: any `*-by:` token (`Co-authored-by`, `Signed-off-by`,
/// `Reviewed-by`, `Acked-by`, `Tested-by`, `Reported-by`, `Suggested-by`,
/// `Helped-by`, ...), `On-behalf-of:` (GitHub's organisation
/// attribution), and `Author:` / `Committer:`. Case and indentation do
/// not matter, as forges read them leniently.
pub fn claims_identity(line: &str) -> bool {
    let token = line
        .trim_start()
        .split_once(':')
        .map(|(token, _)| token.trim_end());
    token
        .filter(|token| is_trailer_token(token))
        .is_some_and(|token| {
            let token = token.to_ascii_lowercase();
            token.ends_with("-by") || matches!(token.as_str(), "on-behalf-of" | "author" | "committer")
        })
}

/// `message` without the lines that [`claims_identity`], blank lines they
/// leave doubled or trailing folded away.
pub fn without_identity_trailers(message: &str) -> String {
    let mut kept: Vec<&str> = Vec::new();
    for line in message.lines().filter(|line| !claims_identity(line)) {
        let blank = line.trim().is_empty();
        if blank && kept.last().is_none_or(|last| last.trim().is_empty()) {
            continue;
        }
        kept.push(line);
    }
    while kept.last().is_some_and(|last| last.trim().is_empty()) {
        kept.pop();
    }
    match kept.is_empty() {
        true => String::new(),
        false => format!("{}\n", kept.join("\n")),
    }
}

/// Writes the commits of `base..head` again with `attribution`, oldest
/// first, each on its rewritten parents; returns the new head. `done`
/// maps commits already written (an earlier push of the same task) to
/// their new ids, so a later round builds on what was pushed.
pub fn rewrite(
    repo: &Repository,
    (base, head): (Oid, Oid),
    attribution: &Attribution,
    done: &mut HashMap<Oid, Oid>,
) -> Result<Oid, AttributionError> {
    let who = &attribution.identity;
    let now = Signature::now(&who.name, &who.email).map_err(AttributionError::Identity)?;
    let mut walk = repo.revwalk().map_err(git("walk the task's commits"))?;
    walk.set_sorting(Sort::TOPOLOGICAL | Sort::REVERSE)
        .map_err(git("walk the task's commits"))?;
    walk.push(head).map_err(git("walk the task's commits"))?;
    walk.hide(base).map_err(git("walk the task's commits"))?;
    let mut new_head = head;
    for oid in walk {
        let oid = oid.map_err(git("walk the task's commits"))?;
        new_head = match done.get(&oid) {
            Some(written) => *written,
            None => {
                let commit = repo.find_commit(oid).map_err(git("read a task commit"))?;
                let written = write_again(repo, &commit, (attribution, &now), done)?;
                done.insert(oid, written);
                written
            }
        };
    }
    Ok(done.get(&head).copied().unwrap_or(new_head))
}

/// One commit by forgehand (`now`), with its trailer and signature, on
/// its parents' new ids.
fn write_again(
    repo: &Repository,
    commit: &Commit<'_>,
    (attribution, now): (&Attribution, &Signature<'_>),
    done: &HashMap<Oid, Oid>,
) -> Result<Oid, AttributionError> {
    let message = without_identity_trailers(&String::from_utf8_lossy(commit.message_raw_bytes()));
    let message = match &attribution.co_author {
        Some(person) => with_trailer(&message, &person.trailer()),
        None if message.is_empty() => "forgehand: the task's change\n".to_owned(),
        None => message,
    };
    let parents = commit
        .parent_ids()
        .map(|p| done.get(&p).copied().unwrap_or(p))
        .map(|p| repo.find_commit(p))
        .collect::<Result<Vec<_>, _>>()
        .map_err(git("read a parent commit"))?;
    let parents: Vec<&Commit<'_>> = parents.iter().collect();
    let tree = commit.tree().map_err(git("read a commit's tree"))?;
    let buffer = repo
        .commit_create_buffer(now, now, &message, &tree, &parents)
        .map_err(git("write a commit"))?;
    let content = String::from_utf8_lossy(&buffer);
    match &attribution.signer {
        Some(signer) => {
            let signature = signer.sign_commit(content.as_bytes())?;
            repo.commit_signed(&content, &signature, Some("gpgsig"))
                .map_err(git("write a signed commit"))
        }
        None => repo
            .odb()
            .and_then(|odb| odb.write(git2::ObjectType::Commit, content.as_bytes()))
            .map_err(git("write a commit")),
    }
}

#[cfg(test)]
#[path = "attribution_tests.rs"]
mod tests;
