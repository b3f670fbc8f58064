//! Who a task's commits are for, and who vouches for them: before a push,
//! the commits the task made (base..head) are written again on the host
//! with a `Co-authored-by:` trailer naming the person who started the run
//! and, when the operator gave a key, an SSH signature. Trees, authors,
//! committers, dates and order are kept; only the message and the
//! signature header change.

use super::signing::CommitSigner;
use crate::forge::ForgeKind;
use git2::{Commit, Oid, Repository, Sort};
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

/// What a task's commits get before they are pushed.
#[derive(Debug, Clone, Default)]
pub struct Attribution {
    pub co_author: Option<CoAuthor>,
    pub signer: Option<Arc<CommitSigner>>,
}

impl Attribution {
    /// Whether commits are written again at all.
    pub fn rewrites(&self) -> bool {
        self.co_author.is_some() || self.signer.is_some()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AttributionError {
    #[error("cannot {action}: {source}")]
    Git {
        action: &'static str,
        #[source]
        source: git2::Error,
    },
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
    line.split_once(": ").is_some_and(|(token, _)| {
        !token.is_empty() && token.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    })
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
    if !attribution.rewrites() {
        return Ok(head);
    }
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
                let written = write_again(repo, &commit, attribution, done)?;
                done.insert(oid, written);
                written
            }
        };
    }
    Ok(done.get(&head).copied().unwrap_or(new_head))
}

/// One commit with the trailer and signature, on its parents' new ids.
fn write_again(
    repo: &Repository,
    commit: &Commit<'_>,
    attribution: &Attribution,
    done: &HashMap<Oid, Oid>,
) -> Result<Oid, AttributionError> {
    let message = String::from_utf8_lossy(commit.message_raw_bytes());
    let message = match &attribution.co_author {
        Some(person) => with_trailer(&message, &person.trailer()),
        None => message.into_owned(),
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
        .commit_create_buffer(&commit.author(), &commit.committer(), &message, &tree, &parents)
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
