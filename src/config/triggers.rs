//! What starts a task besides the trigger label: a mention of forgehand's
//! account in a comment, and a review on a PR/MR forgehand opened.

use super::units::HumanDuration;
use super::ConfigError;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub struct TriggersConfig {
    /// A comment mentioning forgehand's account (`@login`), by someone
    /// allowed to trigger, starts a task on its issue or PR/MR.
    pub mentions: bool,
    /// A review on a PR/MR forgehand opened (inline comments on GitHub,
    /// diff notes on GitLab), by someone allowed to trigger, starts a
    /// follow-up run that answers and resolves its threads.
    pub reviews: bool,
    /// How long a review on a forgehand PR/MR must stay quiet (no new
    /// comment) before its follow-up run starts, so a dozen inline
    /// comments make one run.
    pub review_quiet: Duration,
    /// Whether a run waits after planning for a writer to approve its plan.
    pub plan_approval: PlanApproval,
    /// The label that asks for approval on one item (`plan_approval: label`).
    pub plan_approval_label: String,
    /// How long a plan waits for approval before the task ends.
    pub plan_approval_timeout: Duration,
    /// `plan_approval` for single repositories (`owner/name`, any case).
    pub plan_approval_repositories: BTreeMap<String, PlanApproval>,
}

impl TriggersConfig {
    /// Whether and when `repo`'s runs wait for plan approval: its own
    /// entry in `plan_approval_repositories`, else `plan_approval`.
    pub fn plan_approval_for(&self, repo: &str) -> PlanApproval {
        self.plan_approval_repositories
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(repo))
            .map_or(self.plan_approval, |(_, mode)| *mode)
    }
}

/// When a run stops after planning and waits for a writer's approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanApproval {
    /// Never: the change follows the plan at once.
    #[default]
    Off,
    /// When the item carries `triggers.plan_approval_label`.
    Label,
    /// Every run that plans.
    Always,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawTriggers {
    pub mentions: bool,
    pub reviews: bool,
    pub review_quiet: HumanDuration,
    pub plan_approval: PlanApproval,
    pub plan_approval_label: String,
    pub plan_approval_timeout: HumanDuration,
    pub plan_approval_repositories: BTreeMap<String, PlanApproval>,
}

impl Default for RawTriggers {
    fn default() -> Self {
        RawTriggers {
            mentions: true,
            reviews: true,
            review_quiet: HumanDuration(Duration::from_secs(60)),
            plan_approval: PlanApproval::Off,
            plan_approval_label: "forgehand:approve-plan".into(),
            plan_approval_timeout: HumanDuration(Duration::from_secs(7 * 24 * 3600)),
            plan_approval_repositories: BTreeMap::new(),
        }
    }
}

pub(super) fn resolve_triggers(raw: RawTriggers) -> Result<TriggersConfig, ConfigError> {
    if raw.review_quiet.0 > Duration::from_secs(24 * 3600) {
        return Err(ConfigError::invalid(
            "triggers.review_quiet",
            format!(
                "{} is longer than a day; a review's follow-up would wait that long. Choose up to \"1h\"",
                humantime::format_duration(raw.review_quiet.0)
            ),
        ));
    }
    if raw.plan_approval_label.trim().is_empty() {
        return Err(ConfigError::invalid(
            "triggers.plan_approval_label",
            "is empty; name the label that asks for plan approval, such as \"forgehand:approve-plan\"",
        ));
    }
    if raw.plan_approval_timeout.0.is_zero() {
        return Err(ConfigError::invalid(
            "triggers.plan_approval_timeout",
            "is zero; a plan would time out before anyone read it. Choose such as \"7d\"",
        ));
    }
    if let Some(name) = raw
        .plan_approval_repositories
        .keys()
        .find(|name| name.split('/').filter(|part| !part.is_empty()).count() < 2)
    {
        return Err(ConfigError::invalid(
            &format!("triggers.plan_approval_repositories.{name}"),
            "is not a repository path; name it as owner/name (a GitLab group path such as group/sub/project)",
        ));
    }
    Ok(TriggersConfig {
        mentions: raw.mentions,
        reviews: raw.reviews,
        review_quiet: raw.review_quiet.0,
        plan_approval: raw.plan_approval,
        plan_approval_label: raw.plan_approval_label.trim().to_owned(),
        plan_approval_timeout: raw.plan_approval_timeout.0,
        plan_approval_repositories: raw.plan_approval_repositories,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repositorys_own_entry_wins_over_the_default() {
        let mut raw = RawTriggers {
            plan_approval: PlanApproval::Label,
            ..RawTriggers::default()
        };
        raw.plan_approval_repositories
            .insert("Acme/App".into(), PlanApproval::Always);
        let triggers = resolve_triggers(raw).unwrap();
        assert_eq!(triggers.plan_approval_for("acme/app"), PlanApproval::Always);
        assert_eq!(triggers.plan_approval_for("acme/other"), PlanApproval::Label);
        let mut bad = RawTriggers::default();
        bad.plan_approval_repositories
            .insert("app".into(), PlanApproval::Off);
        let err = resolve_triggers(bad).unwrap_err().to_string();
        assert!(err.contains("plan_approval_repositories.app"), "{err}");
    }
}
