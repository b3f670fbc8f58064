//! What starts a task besides the trigger label: a mention of forgehand's
//! account in a comment, and a review on a PR/MR forgehand opened.

use super::units::HumanDuration;
use super::ConfigError;
use serde::Deserialize;
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
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawTriggers {
    pub mentions: bool,
    pub reviews: bool,
    pub review_quiet: HumanDuration,
}

impl Default for RawTriggers {
    fn default() -> Self {
        RawTriggers {
            mentions: true,
            reviews: true,
            review_quiet: HumanDuration(Duration::from_secs(60)),
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
    Ok(TriggersConfig {
        mentions: raw.mentions,
        reviews: raw.reviews,
        review_quiet: raw.review_quiet.0,
    })
}
