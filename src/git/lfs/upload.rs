//! The upload before the push: every object the task's pointers name
//! that the server does not have yet goes up with the batch API's upload
//! action (then its verify action, when the server gives one). Any
//! failure stops the delivery before anything is pushed.

use super::batch::{Client, Operation};
use super::pointer::Pointer;
use super::LfsError;
use git2::{Oid, Repository};
use std::collections::BTreeMap;

/// Uploads `pending` (pointer to the blob holding its content) through
/// `client`; returns how many objects were sent (the server had the rest).
pub async fn upload(
    client: &Client,
    repo_dir: &std::path::Path,
    pending: &BTreeMap<Pointer, Oid>,
) -> Result<usize, LfsError> {
    if pending.is_empty() {
        return Ok(0);
    }
    let pointers: Vec<Pointer> = pending.keys().cloned().collect();
    let answers = client.batch(Operation::Upload, &pointers).await?;
    let mut sent = 0;
    for pointer in &pointers {
        let Some(answer) = answers.iter().find(|a| a.oid == pointer.oid) else {
            return Err(LfsError::Protocol {
                detail: format!("the upload answer leaves out object {}", pointer.oid),
            });
        };
        if let Some(e) = &answer.error {
            return Err(LfsError::Object {
                oid: pointer.oid.clone(),
                code: e.code,
                message: crate::sanitize::for_forge_line(&e.message, 200),
            });
        }
        let Some(action) = answer.actions.get("upload") else {
            // No upload action: the server already has the object.
            continue;
        };
        let content = read_blob(repo_dir, pending[pointer])?;
        if !pointer.matches(&content) {
            return Err(LfsError::Corrupt {
                oid: pointer.oid.clone(),
            });
        }
        client.upload(action, content).await?;
        if let Some(verify) = answer.actions.get("verify") {
            client.verify(verify, pointer).await?;
        }
        sent += 1;
    }
    Ok(sent)
}

/// The content of blob `id` (a repository handle per read: the upload
/// runs off the thread that holds the task's repository).
fn read_blob(repo_dir: &std::path::Path, id: Oid) -> Result<Vec<u8>, LfsError> {
    let repo = Repository::open(repo_dir).map_err(super::git("open the work tree"))?;
    let blob = repo
        .find_blob(id)
        .map_err(super::git("read an LFS file's content"))?;
    Ok(blob.content().to_vec())
}
