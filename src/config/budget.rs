//! Spending caps in US dollars, at the model catalogue's prices (and
//! `llm.prices`): per task, per repository per day and per month, and for
//! the whole daemon per day and per month. Days and months are UTC.

use super::ConfigError;
use serde::Deserialize;

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BudgetConfig {
    /// What one task may spend; its run wraps up before it would pass it.
    pub task_usd: Option<f64>,
    pub repository_daily_usd: Option<f64>,
    pub repository_monthly_usd: Option<f64>,
    pub daemon_daily_usd: Option<f64>,
    pub daemon_monthly_usd: Option<f64>,
}

impl BudgetConfig {
    /// Whether any cap is set.
    pub fn any(&self) -> bool {
        self.caps().iter().any(|(_, cap)| cap.is_some())
    }

    /// Each cap with its key, for messages.
    pub fn caps(&self) -> [(&'static str, Option<f64>); 5] {
        [
            ("budget.task_usd", self.task_usd),
            ("budget.repository_daily_usd", self.repository_daily_usd),
            ("budget.repository_monthly_usd", self.repository_monthly_usd),
            ("budget.daemon_daily_usd", self.daemon_daily_usd),
            ("budget.daemon_monthly_usd", self.daemon_monthly_usd),
        ]
    }
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct RawBudget {
    pub task_usd: Option<f64>,
    pub repository_daily_usd: Option<f64>,
    pub repository_monthly_usd: Option<f64>,
    pub daemon_daily_usd: Option<f64>,
    pub daemon_monthly_usd: Option<f64>,
}

pub(super) fn resolve_budget(raw: RawBudget) -> Result<BudgetConfig, ConfigError> {
    let budget = BudgetConfig {
        task_usd: raw.task_usd,
        repository_daily_usd: raw.repository_daily_usd,
        repository_monthly_usd: raw.repository_monthly_usd,
        daemon_daily_usd: raw.daemon_daily_usd,
        daemon_monthly_usd: raw.daemon_monthly_usd,
    };
    for (key, cap) in budget.caps() {
        if let Some(cap) = cap {
            if !cap.is_finite() || cap <= 0.0 {
                return Err(ConfigError::invalid(
                    key,
                    format!("{cap} is not a positive amount of US dollars; write e.g. 5 or 0.50, or leave it out for no cap"),
                ));
            }
        }
    }
    Ok(budget)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_must_be_positive_amounts() {
        let raw = RawBudget {
            task_usd: Some(2.5),
            ..RawBudget::default()
        };
        assert_eq!(resolve_budget(raw).unwrap().task_usd, Some(2.5));
        let raw = RawBudget {
            daemon_daily_usd: Some(0.0),
            ..RawBudget::default()
        };
        let err = resolve_budget(raw).unwrap_err().to_string();
        assert!(err.contains("budget.daemon_daily_usd"), "{err}");
        assert!(!resolve_budget(RawBudget::default()).unwrap().any());
    }
}
