//! Files the change delivers without, and why: protected paths by the
//! operator's `delivery.protected_paths`, and workflow files the forge
//! refused for want of a permission (GitHub: `refusing to allow ... to
//! create or update workflow ... without `workflow` scope`). The rest of
//! the change is delivered; the PR/MR and the comment name each file left
//! out and why, and the PR/MR body carries their diff, folded, for a
//! maintainer to apply.

use crate::config::DeliveryConfig;
use crate::git::workspace::{is_protected, Withheld};
use crate::journal::RepoFact;
use crate::sanitize;
use crate::task::run::TaskRun;

/// What a run leaves out of the change: the operator's protected paths
/// (unless allowed), and the workflow files the forge refused before in
/// this repository (so the same push is never sent again).
pub(in crate::task) struct Rules {
    setting: Vec<String>,
    /// What the forge said would allow workflow files, when it refused them.
    refused: Option<String>,
}

impl Rules {
    pub fn for_run(run: &TaskRun<'_>, delivery: &DeliveryConfig) -> Rules {
        let setting = match delivery.allow_protected_paths {
            true => Vec::new(),
            false => delivery.protected_paths.clone(),
        };
        let refused = run
            .journal
            .repo_fact(
                run.item.forge.as_str(),
                &run.item.repo,
                RepoFact::WorkflowsRefused,
            )
            .unwrap_or_else(|e| {
                tracing::warn!(task = %run.item, "cannot read what the forge refused before: {e}");
                None
            });
        Rules { setting, refused }
    }

    /// Every path prefix left out.
    pub fn paths(&self) -> Vec<String> {
        let mut paths = self.setting.clone();
        if self.refused.is_some() && !paths.iter().any(|p| p == WORKFLOWS) {
            paths.push(WORKFLOWS.to_owned());
        }
        paths
    }

    /// The files left out, by why (each group with its part of the diff).
    pub fn split(&self, withheld: Option<&Withheld>) -> Vec<(Withheld, Why)> {
        let Some(withheld) = withheld else {
            return Vec::new();
        };
        let (by_setting, by_forge): (Vec<String>, Vec<String>) = withheld
            .paths
            .iter()
            .cloned()
            .partition(|p| is_protected(p, &self.setting));
        let mut groups = Vec::new();
        if !by_setting.is_empty() {
            groups.push((part(withheld, by_setting), Why::Setting));
        }
        if let (false, Some(permission)) = (by_forge.is_empty(), &self.refused) {
            let why = Why::Forge {
                permission: permission.clone(),
            };
            groups.push((part(withheld, by_forge), why));
        }
        groups
    }
}

/// `withheld` for `paths` only: the files' sections of the diff.
fn part(withheld: &Withheld, paths: Vec<String>) -> Withheld {
    let mut diff = String::new();
    for file in withheld
        .diff
        .split_inclusive('\n')
        .fold(Vec::<String>::new(), |mut files, line| {
            match (line.starts_with("diff --git "), files.last_mut()) {
                (false, Some(last)) => last.push_str(line),
                _ => files.push(line.to_owned()),
            }
            files
        })
    {
        let header = file.lines().next().unwrap_or_default();
        if paths.iter().any(|p| header.ends_with(&format!(" b/{p}"))) {
            diff.push_str(&file);
        }
    }
    Withheld { paths, diff }
}

/// Remembers for the repository that the forge refused workflow files, so
/// later tasks leave them out before they push.
pub(in crate::task) fn remember_refusal(run: &TaskRun<'_>, refusal: &WorkflowRefusal) {
    let learned = run.journal.learn_repo_fact(
        run.item.forge.as_str(),
        &run.item.repo,
        RepoFact::WorkflowsRefused,
        &refusal.permission,
    );
    if let Err(e) = learned {
        tracing::warn!(task = %run.item, "cannot remember that the forge refuses workflow files: {e}");
    }
}

/// Why files were left out.
#[derive(Debug, Clone, PartialEq)]
pub(in crate::task) enum Why {
    /// `delivery.protected_paths`.
    Setting,
    /// The forge refused them; what would let it take them.
    Forge { permission: String },
}

/// The folder GitHub guards with the `workflow` scope / `workflows` permission.
pub(in crate::task) const WORKFLOWS: &str = ".github/workflows/";

/// A push the forge refused because it adds or changes a workflow file.
#[derive(Debug, Clone, PartialEq)]
pub(in crate::task) struct WorkflowRefusal {
    /// What would let the forge take it (``the `workflow` scope``).
    pub permission: String,
}

/// GitHub's refusal of a workflow file in a rejected push's reason, e.g.
/// ``refusing to allow a GitHub App to create or update workflow
/// `.github/workflows/ci.yml` without `workflows` permission``.
pub(in crate::task) fn workflow_refusal(reason: &str) -> Option<WorkflowRefusal> {
    let start = reason.find("refusing to allow ")?;
    let said = &reason[start..];
    if !said.contains("to create or update workflow") {
        return None;
    }
    let after = &said[said.find(" without `")? + " without ".len()..];
    let name_end = after[1..].find('`')? + 2;
    let name = &after[..name_end];
    let kind = after[name_end..]
        .trim_start()
        .split(|c: char| !c.is_ascii_alphabetic())
        .next()
        .filter(|word| matches!(*word, "scope" | "permission"))?;
    Some(WorkflowRefusal {
        permission: format!("the {} {kind}", sanitize::for_forge_line(name, 40)),
    })
}

/// One line naming the files left out and why, for the comment and the
/// PR/MR.
pub(in crate::task) fn line(withheld: &Withheld, why: &Why) -> String {
    let names = withheld
        .paths
        .iter()
        .map(|p| format!("`{}`", sanitize::for_forge_line(p, 200).replace('`', "'")))
        .collect::<Vec<_>>()
        .join(", ");
    match why {
        Why::Setting => format!(
            "Left out of the change: {names}. They are protected paths (delivery.protected_paths); an operator may let forgehand change them with delivery.allow_protected_paths. Their diff is in the description, for a maintainer to apply."
        ),
        Why::Forge { permission } => format!(
            "Left out of the change: {names}. The forge refused them: forgehand's token lacks {permission}, which would allow it. Their diff is in the description, for a maintainer to apply."
        ),
    }
}

/// The line and the files' diff folded, for the PR/MR body.
pub(in crate::task) fn section(withheld: &Withheld, why: &Why) -> String {
    format!(
        "{}\n\n<details><summary>The diff of the files left out</summary>\n\n{}\n\n</details>",
        line(withheld, why),
        diff_fenced(&withheld.diff)
    )
}

/// The diff in a ```diff fence it cannot close, with nothing in it that
/// hides text or reads as one of forgehand's markers.
fn diff_fenced(diff: &str) -> String {
    let safe = sanitize::for_model(&diff.replace("<!--", "&lt;!--"));
    let longest = safe.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}diff\n{}\n{fence}", safe.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn githubs_workflow_refusals_are_read_for_apps_and_tokens() {
        let app = "pre-receive hook declined (refusing to allow a GitHub App to create or update workflow `.github/workflows/ci.yml` without `workflows` permission)";
        assert_eq!(
            workflow_refusal(app),
            Some(WorkflowRefusal {
                permission: "the `workflows` permission".into()
            })
        );
        let token = "refusing to allow a Personal Access Token to create or update workflow `.github/workflows/release.yaml` without `workflow` scope";
        assert_eq!(
            workflow_refusal(token).unwrap().permission,
            "the `workflow` scope"
        );
        assert_eq!(workflow_refusal("pre-receive hook declined"), None);
        assert_eq!(workflow_refusal("not a fast-forward"), None);
    }

    #[test]
    fn each_reason_gets_its_own_files_part_of_the_diff() {
        let withheld = Withheld {
            paths: vec![".gitlab-ci.yml".into(), ".github/workflows/ci.yml".into()],
            diff: "diff --git a/.github/workflows/ci.yml b/.github/workflows/ci.yml\n+on: push\ndiff --git a/.gitlab-ci.yml b/.gitlab-ci.yml\n+test: {}\n".into(),
        };
        let rules = Rules {
            setting: vec![".gitlab-ci.yml".into()],
            refused: Some("the `workflow` scope".into()),
        };
        let groups = rules.split(Some(&withheld));
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].1, Why::Setting);
        assert_eq!(groups[0].0.paths, vec![".gitlab-ci.yml".to_owned()]);
        assert_eq!(
            groups[0].0.diff,
            "diff --git a/.gitlab-ci.yml b/.gitlab-ci.yml\n+test: {}\n"
        );
        assert!(matches!(&groups[1].1, Why::Forge { permission } if permission == "the `workflow` scope"));
        assert!(groups[1].0.diff.contains("+on: push") && !groups[1].0.diff.contains("gitlab"));
        assert_eq!(
            rules.paths(),
            vec![".gitlab-ci.yml".to_owned(), WORKFLOWS.to_owned()]
        );
    }

    #[test]
    fn the_section_names_each_file_and_folds_a_diff_it_cannot_break() {
        let withheld = Withheld {
            paths: vec![".github/workflows/ci.yml".into()],
            diff: "+run: echo ```` <!-- forgehand:task x -->\n".into(),
        };
        let said = section(&withheld, &Why::Setting);
        assert!(said.contains("`.github/workflows/ci.yml`") && said.contains("delivery.protected_paths"));
        assert!(said.contains("<details>") && said.contains("`````diff\n+run: echo ````"));
        assert!(!said.contains("<!-- forgehand"), "{said}");
    }
}
