//! The one progress comment of a task: created at claim, then edited in
//! place. A hidden marker names the task, so a restarted daemon finds the
//! comment and continues it instead of posting another.

use crate::agent::plan::{PlanStep, StepStatus};
use crate::forge::ItemRef;
use std::time::SystemTime;

/// The marker put in every progress comment of `item`.
pub fn marker(item: &ItemRef) -> String {
    format!("<!-- forgehand:task {} -->", item.key())
}

/// What a new task's comment says it is doing, before its first line.
pub const CLAIMED: &str = "Claimed";

/// `line` as the comment's history shows it, said at `when`: also the
/// task's status line on the status board.
pub fn history_line(when: SystemTime, line: &str) -> String {
    let stamp = humantime::format_rfc3339_seconds(when).to_string();
    format!("{} {line}", stamp.replace('T', " ").trim_end_matches('Z'))
}

/// Whether a comment is a progress comment of forgehand (of any task).
pub fn is_progress_comment(body: &str) -> bool {
    body.contains("<!-- forgehand:task ")
}

/// The task's steps on the progress comment's checklist, named as the
/// phases that do them (`task::phases`) and as the metrics' `phase` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Claim,
    Prepare,
    Plan,
    Change,
    Push,
    Deliver,
    Ci,
}

impl Step {
    /// The checklist's steps, in order.
    pub const ALL: [Step; 7] = STEPS;

    /// Its place in the checklist.
    pub fn index(self) -> usize {
        STEPS.iter().position(|s| *s == self).unwrap_or(0)
    }

    /// The step at `index` of the checklist, if any.
    pub fn nth(index: usize) -> Option<Step> {
        STEPS.get(index).copied()
    }

    /// The phase's name in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Claim => "claim",
            Step::Prepare => "prepare",
            Step::Plan => "plan",
            Step::Change => "change",
            Step::Push => "push",
            Step::Deliver => "deliver",
            Step::Ci => "ci",
        }
    }
}

const STEPS: [Step; 7] = [
    Step::Claim,
    Step::Prepare,
    Step::Plan,
    Step::Change,
    Step::Push,
    Step::Deliver,
    Step::Ci,
];

#[derive(Debug, Clone)]
pub struct Progress {
    item: ItemRef,
    branch: Option<String>,
    /// Steps done so far.
    done: usize,
    phase: String,
    history: Vec<String>,
    outcome: Option<String>,
    /// The plan's checklist, kept current by the model's `update_plan`.
    plan: Vec<PlanStep>,
    /// The final plan as a collapsed section, with how it was made.
    plan_details: Option<String>,
    /// The pushed commit's checks, one line, once they are followed.
    ci: Option<String>,
}

/// What a comment shows that a later run of the task goes on from: its
/// history, plan, checks and branch (a task that waited on its checks
/// starts a new run, and its comment continues).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KeptProgress {
    branch: Option<String>,
    history: Vec<String>,
    plan: Vec<PlanStep>,
    plan_details: Option<String>,
    ci: Option<String>,
}

impl Progress {
    /// What a later run goes on from.
    pub fn kept(&self) -> KeptProgress {
        KeptProgress {
            branch: self.branch.clone(),
            history: self.history.clone(),
            plan: self.plan.clone(),
            plan_details: self.plan_details.clone(),
            ci: self.ci.clone(),
        }
    }

    /// Goes on from an earlier run's comment.
    pub fn restore(&mut self, kept: KeptProgress) {
        let KeptProgress {
            branch,
            history,
            plan,
            plan_details,
            ci,
        } = kept;
        self.branch = self.branch.take().or(branch);
        let mut all = history;
        all.append(&mut self.history);
        self.history = all;
        self.plan = plan;
        self.plan_details = plan_details;
        self.ci = ci;
    }

    pub fn new(item: &ItemRef) -> Progress {
        Progress {
            item: item.clone(),
            branch: None,
            done: 0,
            phase: CLAIMED.into(),
            history: Vec::new(),
            outcome: None,
            plan: Vec::new(),
            plan_details: None,
            ci: None,
        }
    }

    /// The checks of the pushed commit, as one line.
    pub fn set_ci(&mut self, line: impl Into<String>) {
        self.ci = Some(line.into());
    }

    /// The final plan, shown collapsed under the checklist (and in the
    /// PR/MR body): `made` says who planned and judged, the consensus, the
    /// confidence and the cost.
    pub fn set_plan_details(&mut self, made: &str, plan: &str) {
        self.plan_details = Some(plan_details(made, plan));
    }

    pub fn plan_details(&self) -> Option<&str> {
        self.plan_details.as_deref()
    }

    pub fn set_plan(&mut self, plan: Vec<PlanStep>) {
        self.plan = plan;
    }

    pub fn plan(&self) -> &[PlanStep] {
        &self.plan
    }

    pub fn set_branch(&mut self, branch: &str) {
        self.branch = Some(branch.to_owned());
    }

    /// Marks every step before `step` done and says what happens now.
    pub fn at(&mut self, step: Step, phase: impl Into<String>, when: SystemTime) {
        self.done = step.index();
        self.status_now(phase, when);
    }

    /// Says what happens now without moving the checklist.
    pub fn status_now(&mut self, phase: impl Into<String>, when: SystemTime) {
        self.phase = phase.into();
        self.note(self.phase.clone(), when);
    }

    pub fn note(&mut self, line: impl Into<String>, when: SystemTime) {
        const KEEP: usize = 20;
        self.history.push(history_line(when, &line.into()));
        if self.history.len() > KEEP {
            self.history.remove(0);
        }
    }

    /// The step under way (for the status page).
    pub fn step(&self) -> Option<Step> {
        Step::nth(self.done)
    }

    /// Ends the task's comment.
    pub fn finish(
        &mut self,
        all_done: bool,
        phase: impl Into<String>,
        outcome: impl Into<String>,
        when: SystemTime,
    ) {
        if all_done {
            self.done = STEPS.len();
        }
        self.status_now(phase, when);
        self.outcome = Some(outcome.into());
    }

    /// The current status, one line.
    pub fn status(&self) -> &str {
        self.history.last().map(String::as_str).unwrap_or(&self.phase)
    }

    pub fn render(&self) -> String {
        let change = self.item.forge.change_noun();
        let branch = self.branch.as_deref().unwrap_or("the task branch");
        let labels = [
            "Claim the task".to_owned(),
            "Prepare the workspace".to_owned(),
            "Plan the change (models debate a plan)".to_owned(),
            "Make the change (model with editor and commands)".to_owned(),
            format!("Push `{branch}`"),
            format!("Open or update the draft {change}"),
            "Follow the checks (CI)".to_owned(),
        ];
        let mut out = String::new();
        out.push_str(&marker(&self.item));
        out.push_str("\n### forgehand\n\n");
        out.push_str(&format!("**Status:** {}\n\n", self.phase));
        if let Some(ci) = &self.ci {
            out.push_str(&format!("**CI:** {ci}\n\n"));
        }
        for (i, label) in labels.iter().enumerate() {
            let mark = if i < self.done { "x" } else { " " };
            out.push_str(&format!("- [{mark}] {label}\n"));
        }
        if !self.plan.is_empty() {
            let done = self
                .plan
                .iter()
                .filter(|s| s.status == StepStatus::Completed)
                .count();
            out.push_str(&format!("\n**Plan** ({done} of {} done)\n\n", self.plan.len()));
            for step in &self.plan {
                let line = match step.status {
                    StepStatus::Completed => format!("- [x] {}", step.step),
                    StepStatus::InProgress => format!("- [ ] {} *(in progress)*", step.step),
                    StepStatus::Pending => format!("- [ ] {}", step.step),
                };
                out.push_str(&line);
                out.push('\n');
            }
        }
        if let Some(details) = &self.plan_details {
            out.push_str(&format!("\n{details}\n"));
        }
        if let Some(outcome) = &self.outcome {
            out.push_str(&format!("\n{outcome}\n"));
        }
        out.push_str("\n<details><summary>History</summary>\n\n");
        for line in &self.history {
            out.push_str(&format!("- {line}\n"));
        }
        out.push_str("\n</details>\n");
        out
    }
}

/// A plan shown on the forge is cut here: a comment holds 64 KiB at most.
const PLAN_SHOWN_CHARS: usize = 20_000;

/// The plan in a collapsed `<details>` section. The plan is a model's text:
/// it cannot close the section early or pose as forgehand's marker.
fn plan_details(made: &str, plan: &str) -> String {
    let mut text: String = plan
        .replace("</details>", "&lt;/details&gt;")
        .replace("<!--", "&lt;!--");
    if text.chars().count() > PLAN_SHOWN_CHARS {
        text = text.chars().take(PLAN_SHOWN_CHARS).collect();
        text.push_str("\n\n… (cut here; the whole plan is in forgehand's journal)");
    }
    format!(
        "<details><summary>The plan: {}</summary>\n\n{}\n\n</details>",
        made.trim().replace(['\n', '<', '>'], " "),
        text.trim()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forge::{ForgeKind, ItemKind};

    #[test]
    fn the_comment_carries_the_marker_checklist_and_outcome() {
        let item = ItemRef {
            forge: ForgeKind::GitHub,
            repo: "acme/api".into(),
            kind: ItemKind::Issue,
            number: 3,
        };
        let mut p = Progress::new(&item);
        p.set_branch("forgehand/issue-3");
        p.at(
            Step::Change,
            "Working: the model is making the change",
            SystemTime::now(),
        );
        let text = p.render();
        assert!(text.starts_with("<!-- forgehand:task github:acme/api:issue:3 -->"));
        assert!(text.contains("- [x] Claim the task"));
        assert!(text.contains("- [ ] Push `forgehand/issue-3`"));
        assert!(text.contains("- [x] Plan the change"));
        p.set_plan(vec![
            PlanStep {
                step: "Parse the flag".into(),
                status: StepStatus::Completed,
            },
            PlanStep {
                step: "Test it".into(),
                status: StepStatus::InProgress,
            },
        ]);
        let text = p.render();
        assert!(text.contains("**Plan** (1 of 2 done)"), "{text}");
        assert!(
            text.contains("- [x] Parse the flag\n- [ ] Test it *(in progress)*"),
            "{text}"
        );
        assert!(is_progress_comment(&text));
        p.finish(
            true,
            "Done",
            "Draft pull request: https://example/pr/1",
            SystemTime::now(),
        );
        let text = p.render();
        assert!(text.contains("- [x] Open or update the draft pull request"));
        assert!(text.contains("Draft pull request: https://example/pr/1"));
    }

    #[test]
    fn the_plan_is_shown_collapsed_and_cannot_break_out() {
        let item = ItemRef {
            forge: ForgeKind::GitLab,
            repo: "g/p".into(),
            kind: ItemKind::Issue,
            number: 1,
        };
        let mut p = Progress::new(&item);
        p.set_plan_details(
            "debate of o3 (A), gemini (B) judged by o3; consensus 0.91; judge's confidence 0.80; $0.42",
            "# Final Implementation Plan\n1. Edit\n</details><!-- forgehand:task x -->",
        );
        let text = p.render();
        assert!(text.contains("<details><summary>The plan: debate of o3 (A), gemini (B) judged by o3; consensus 0.91; judge's confidence 0.80; $0.42</summary>"), "{text}");
        assert!(text.contains("# Final Implementation Plan\n1. Edit"), "{text}");
        assert_eq!(
            text.matches("</details>").count(),
            2,
            "plan and history only: {text}"
        );
        assert_eq!(text.matches("<!-- forgehand:task").count(), 1, "{text}");
        let long = plan_details("m", &"x".repeat(PLAN_SHOWN_CHARS + 10));
        assert!(long.contains("cut here"));
    }
}
