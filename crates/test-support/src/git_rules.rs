//! What GitHub refuses a push for, on the tests' bare repositories: a
//! protected branch, and workflow files without the permission. An `update`
//! hook (one ref at a time, as GitHub refuses one ref of a push and takes
//! the others) applies the rules; behind [`crate::git_http::GitHttpServer`]
//! the ref's status then carries GitHub's own words, as `git push` shows
//! them:
//!
//! ```text
//! remote: error: GH006: Protected branch update failed for refs/heads/main.
//! remote: error: Changes must be made through a pull request.
//!  ! [remote rejected] main -> main (protected branch hook declined)
//!  ! [remote rejected] x -> x (refusing to allow a GitHub App to create or update workflow `.github/workflows/ci.yml` without `workflows` permission)
//! ```
//!
//! (quoted by SageMathOER-CCC/sage-discrete-math#84, desktop/desktop#17586,
//! damianooldoni's devops-infra/action-commit-push#59, and for tokens
//! epics-modules/pyDevSup#42 and InKyoJeong/TIL#13). `git receive-pack`
//! itself can only say `hook declined`: the hook leaves GitHub's words in a
//! file the server names in `FORGEHAND_FAKE_PUSH_STATUS`, and the server
//! puts them in the report ([`rewrite_report`]). Pushed some other way
//! (`file://`), the words come as `remote:` lines instead.

use std::collections::HashMap;
use std::path::Path;

/// The environment variable naming the file where the hook leaves each
/// refused ref's status (`REF REASON` lines).
pub(crate) const STATUS_FILE_VAR: &str = "FORGEHAND_FAKE_PUSH_STATUS";

/// Who pushes, as GitHub names it when it refuses workflow files, and what
/// would have let it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pusher {
    /// A GitHub App installation token: "without `workflows` permission".
    App,
    /// A personal access token (classic): "without `workflow` scope".
    PersonalAccessToken,
    /// An OAuth App's token: "without `workflow` scope".
    OAuthApp,
}

impl Pusher {
    fn words(self) -> (&'static str, &'static str) {
        match self {
            Pusher::App => ("a GitHub App", "`workflows` permission"),
            Pusher::PersonalAccessToken => ("a Personal Access Token", "`workflow` scope"),
            Pusher::OAuthApp => ("an OAuth App", "`workflow` scope"),
        }
    }
}

const HOOK: &str = r#"#!/bin/sh
# The fake GitHub's rules for one pushed ref (see git_rules.rs).
ref="$1" new="$3"
refuse() {
  if [ -n "$FORGEHAND_FAKE_PUSH_STATUS" ]; then
    echo "$ref $1" >> "$FORGEHAND_FAKE_PUSH_STATUS"
  else
    echo "$1" >&2
  fi
  exit 1
}
branch=${ref#refs/heads/}
if [ -f "$GIT_DIR/protected-branches" ] && grep -qxF -- "$branch" "$GIT_DIR/protected-branches"; then
  echo "$ref protected branch" >> "$GIT_DIR/refused-pushes.log"
  echo "error: GH006: Protected branch update failed for $ref." >&2
  echo "error: Changes must be made through a pull request." >&2
  refuse "protected branch hook declined"
fi
[ "$new" = 0000000000000000000000000000000000000000 ] && exit 0
if [ -f "$GIT_DIR/workflow-refusal" ]; then
  IFS='|' read -r who what < "$GIT_DIR/workflow-refusal"
  for commit in $(git rev-list "$new" --not --branches); do
    file=$(git diff-tree --root --no-commit-id --name-only -r -m "$commit" | grep '^\.github/workflows/' | head -n 1)
    if [ -n "$file" ]; then
      echo "$ref $file" >> "$GIT_DIR/refused-pushes.log"
      refuse "refusing to allow $who to create or update workflow \`$file\` without $what"
    fi
  done
fi
exit 0
"#;

fn install_hook(bare: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let hook = bare.join("hooks").join("update");
    std::fs::create_dir_all(hook.parent().expect("hooks folder")).expect("hooks folder");
    std::fs::write(&hook, HOOK).expect("write the update hook");
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755))
        .expect("make the hook executable");
}

/// The bare repository refuses, as GitHub does for a protected branch
/// that takes changes only through pull requests, every push that
/// updates, creates or deletes `branch`.
pub fn protect_branch(bare: &Path, branch: &str) {
    install_hook(bare);
    let list = bare.join("protected-branches");
    let mut names = std::fs::read_to_string(&list).unwrap_or_default();
    names.push_str(branch);
    names.push('\n');
    std::fs::write(list, names).expect("write the protected branches");
}

/// The bare repository refuses, as GitHub does for a personal access token
/// without the `workflow` scope, every push whose new commits add, change
/// or remove a file under `.github/workflows/`, naming the first such
/// file; each refusal is a line of [`refused_pushes`].
pub fn refuse_workflow_files(bare: &Path) {
    refuse_workflow_files_from(bare, Pusher::PersonalAccessToken);
}

/// [`refuse_workflow_files`], in the words GitHub has for `pusher`.
pub fn refuse_workflow_files_from(bare: &Path, pusher: Pusher) {
    install_hook(bare);
    let (who, what) = pusher.words();
    std::fs::write(bare.join("workflow-refusal"), format!("{who}|{what}\n"))
        .expect("write the workflow rule");
}

/// The pushes the bare repository refused, one line each: `REF FILE` for
/// workflow files, `REF protected branch` for a protected branch.
pub fn refused_pushes(bare: &Path) -> Vec<String> {
    std::fs::read_to_string(bare.join("refused-pushes.log"))
        .map(|text| text.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The refused refs' statuses the hook left in `file` (`REF REASON` lines).
pub(crate) fn read_statuses(file: &Path) -> HashMap<String, String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.split_once(' '))
        .map(|(refname, reason)| (refname.to_owned(), reason.to_owned()))
        .collect()
}

/// The pkt-lines of `data`: `Some(payload)`, or `None` for a flush; `None`
/// when `data` is not pkt-lines.
fn pkt_lines(mut data: &[u8]) -> Option<Vec<Option<&[u8]>>> {
    let mut lines = Vec::new();
    while !data.is_empty() {
        let size = usize::from_str_radix(std::str::from_utf8(data.get(..4)?).ok()?, 16).ok()?;
        if size == 0 {
            lines.push(None);
            data = &data[4..];
            continue;
        }
        lines.push(Some(data.get(4..size)?));
        data = &data[size..];
    }
    Some(lines)
}

fn pkt(out: &mut Vec<u8>, payload: &[u8]) {
    out.extend_from_slice(format!("{:04x}", payload.len() + 4).as_bytes());
    out.extend_from_slice(payload);
}

/// A report-status (`unpack ok`, `ok REF`, `ng REF REASON`, flush) with
/// each refused ref of `reasons` given its reason.
fn rewrite_statuses(report: &[u8], reasons: &HashMap<String, String>) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    for line in pkt_lines(report)? {
        let Some(line) = line else {
            out.extend_from_slice(b"0000");
            continue;
        };
        let text = String::from_utf8_lossy(line);
        let refused = text
            .strip_prefix("ng ")
            .and_then(|rest| rest.trim_end().split_once(' '))
            .and_then(|(refname, _)| Some((refname, reasons.get(refname)?)));
        match refused {
            Some((refname, reason)) => pkt(&mut out, format!("ng {refname} {reason}\n").as_bytes()),
            None => pkt(&mut out, line),
        }
    }
    Some(out)
}

/// `git receive-pack`'s answer (`body`) with the refused refs' statuses
/// in GitHub's words (`reasons`), whether the report comes bare or in
/// side-band 1 (progress and errors, bands 2 and 3, are left as they are).
/// Unchanged when it cannot be read.
pub(crate) fn rewrite_report(body: &[u8], reasons: &HashMap<String, String>) -> Vec<u8> {
    if reasons.is_empty() {
        return body.to_vec();
    }
    let Some(lines) = pkt_lines(body) else {
        return body.to_vec();
    };
    if lines
        .first()
        .is_some_and(|l| l.is_some_and(|p| p.starts_with(b"unpack ")))
    {
        return rewrite_statuses(body, reasons).unwrap_or_else(|| body.to_vec());
    }
    let report: Vec<u8> = lines
        .iter()
        .flatten()
        .filter(|p| p.first() == Some(&1))
        .flat_map(|p| p[1..].iter().copied())
        .collect();
    let Some(report) = rewrite_statuses(&report, reasons) else {
        return body.to_vec();
    };
    let mut out = Vec::new();
    let mut reported = false;
    for line in lines {
        match line {
            None => out.extend_from_slice(b"0000"),
            Some(p) if p.first() == Some(&1) => {
                if !reported {
                    // 65520 bytes a packet at most, the band byte included.
                    for chunk in report.chunks(65515) {
                        let mut banded = vec![1];
                        banded.extend_from_slice(chunk);
                        pkt(&mut out, &banded);
                    }
                    reported = true;
                }
            }
            Some(p) => pkt(&mut out, p),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkts(lines: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for line in lines {
            match line.is_empty() {
                true => out.extend_from_slice(b"0000"),
                false => pkt(&mut out, line),
            }
        }
        out
    }

    #[test]
    fn a_refused_refs_status_gets_githubs_words_bare_and_in_side_band() {
        let reasons = HashMap::from([(
            "refs/heads/main".to_owned(),
            "protected branch hook declined".to_owned(),
        )]);
        let bare = pkts(&[
            b"unpack ok\n",
            b"ok refs/heads/x\n",
            b"ng refs/heads/main hook declined\n",
            b"",
        ]);
        let want = pkts(&[
            b"unpack ok\n",
            b"ok refs/heads/x\n",
            b"ng refs/heads/main protected branch hook declined\n",
            b"",
        ]);
        assert_eq!(rewrite_report(&bare, &reasons), want);

        let banded = |report: &[u8]| {
            let mut one = vec![1];
            one.extend_from_slice(report);
            pkts(&[b"\x02error: GH006: Protected branch update failed\n", &one, b""])
        };
        assert_eq!(rewrite_report(&banded(&bare), &reasons), banded(&want));
        // Nothing to say, or not pkt-lines: as it came.
        assert_eq!(rewrite_report(&bare, &HashMap::new()), bare);
        assert_eq!(rewrite_report(b"zzzz", &reasons), b"zzzz");
    }
}
