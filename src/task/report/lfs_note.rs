//! Git LFS as the task says it: the progress line about the checkout's LFS
//! files, and the upload before a push, whose failure ends the task before
//! anything is pushed.

use crate::git::lfs::checkout::Fetched;
use crate::task::run::TaskRun;
use crate::task::state::error::TaskError;
use crate::task::workbench::workspace_handle::WorkspaceHandle;

/// Most paths a progress line names.
const LISTED: usize = 10;

/// One line for the progress comment.
pub(in crate::task) fn progress_line(fetched: &Fetched) -> String {
    let mut line = format!(
        "Git LFS: {} file(s) fetched ({} bytes)",
        fetched.files.len(),
        fetched.bytes
    );
    if !fetched.left.is_empty() {
        let named: Vec<String> = fetched
            .left
            .iter()
            .take(LISTED)
            .map(|(path, why)| {
                format!(
                    "{} ({})",
                    crate::sanitize::for_forge_line(path, 200),
                    crate::sanitize::for_forge_line(why, 300)
                )
            })
            .collect();
        line.push_str(&format!(
            "; left as pointers the agent cannot see: {}{}",
            named.join("; "),
            if fetched.left.len() > LISTED {
                format!("; and {} more", fetched.left.len() - LISTED)
            } else {
                String::new()
            }
        ));
    }
    line
}

/// Uploads the task's new LFS objects before the push; when that fails,
/// nothing is pushed and the task ends saying why.
pub(in crate::task) async fn upload_before_push(
    run: &TaskRun<'_>,
    workspace: &WorkspaceHandle,
) -> Result<(), TaskError> {
    match workspace.with(|ws| ws.upload_lfs()).await? {
        Ok(0) => Ok(()),
        Ok(sent) => {
            run.note(format!("Git LFS: {sent} object(s) uploaded before the push"));
            Ok(())
        }
        Err(e) => Err(TaskError::Other(format!(
            "nothing was pushed: the Git LFS upload failed ({e}); the branch's LFS files would point at objects the server does not have"
        ))),
    }
}
