//! Budgets in money. Every model call of a task goes through
//! [`Budgeted`], which sets the call's output room to what the money left
//! under the tightest cap pays for (the task's, its repository's for the
//! day and the month, the daemon's for the day and the month), at the
//! dearest candidate model's prices after its input. A call whose worst
//! case would pass a cap even with the smallest useful room
//! ([`MIN_OUTPUT_TOKENS`]) is not sent: the caller hears `LlmError::Budget`
//! saying which cap, so a run uses its cap and never passes it. Every answer's cost goes to the journal's
//! ledger (per UTC day, repository and model) and to `/metrics`.
//!
//! Before a new item starts, [`waits`] says whether its repository's or
//! the daemon's spend for the period would pass a cap, and when the period
//! turns.

mod model;
mod period;

pub use model::{Budgeted, MIN_OUTPUT_TOKENS};
pub use period::Period;

use crate::config::{BudgetConfig, Price};
use crate::journal::{Journal, JournalError, Whose};
use crate::llm::usage::UsageReport;
use crate::llm::TokenUsage;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// A cap that a call, or a new task, would pass.
#[derive(Debug, Clone, PartialEq)]
pub struct OverCap {
    /// The setting: `budget.task_usd`, `budget.repository_daily_usd`, ….
    pub key: &'static str,
    pub cap: f64,
    pub spent: f64,
    /// When its period turns (`None`: the task's own cap never does).
    pub turns: Option<chrono::DateTime<chrono::Utc>>,
}

impl std::fmt::Display for OverCap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (${:.2}) is spent: ${:.4} used",
            self.key, self.cap, self.spent
        )?;
        if let Some(turns) = self.turns {
            write!(f, "; it starts over at {}", turns.format("%Y-%m-%d %H:%M UTC"))?;
        }
        Ok(())
    }
}

/// The caps one task runs under: the operator's, lowered by the
/// repository's `.forgehand.yaml` once it is read.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Caps {
    pub task: Option<f64>,
    pub repository_daily: Option<f64>,
    pub repository_monthly: Option<f64>,
    pub daemon_daily: Option<f64>,
    pub daemon_monthly: Option<f64>,
}

impl From<&BudgetConfig> for Caps {
    fn from(c: &BudgetConfig) -> Caps {
        Caps {
            task: c.task_usd,
            repository_daily: c.repository_daily_usd,
            repository_monthly: c.repository_monthly_usd,
            daemon_daily: c.daemon_daily_usd,
            daemon_monthly: c.daemon_monthly_usd,
        }
    }
}

/// The lower of two caps (`None` is no cap).
fn lower(operator: Option<f64>, repository: Option<f64>) -> Option<f64> {
    match (operator, repository) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// One task's spending: its caps, what it spent, and the ledger.
pub struct Spend {
    caps: Mutex<Caps>,
    journal: Arc<Journal>,
    metrics: Arc<crate::metrics::Metrics>,
    repo: String,
    prices: UsageReport,
    task_spent: Mutex<f64>,
    /// The task cap's name in refusals: `budget.task_usd`, or an attempt's share of it.
    task_key: &'static str,
    /// Whether answers go to the ledger and the metrics (an attempt's
    /// share leaves that to the task's own spending beneath it).
    ledger: bool,
}

impl Spend {
    pub fn new(
        caps: Caps,
        journal: Arc<Journal>,
        metrics: Arc<crate::metrics::Metrics>,
        repo: &str,
        prices: BTreeMap<String, Price>,
    ) -> Spend {
        Spend {
            caps: Mutex::new(caps),
            journal,
            metrics,
            repo: repo.to_owned(),
            prices: UsageReport::new(prices),
            task_spent: Mutex::new(0.0),
            task_key: "budget.task_usd",
            ledger: true,
        }
    }

    /// One attempt's share (`usd`) of the task's money, for a [`Budgeted`]
    /// over the task's own: the task's caps and ledger stay with the task.
    pub fn share(&self, usd: f64) -> Spend {
        Spend {
            caps: Mutex::new(Caps {
                task: Some(usd.max(0.0)),
                ..Caps::default()
            }),
            journal: self.journal.clone(),
            metrics: self.metrics.clone(),
            repo: self.repo.clone(),
            prices: self.prices.clone(),
            task_spent: Mutex::new(0.0),
            task_key: "the attempt's share of budget.task_usd",
            ledger: false,
        }
    }

    /// What is left under the task's own cap; `None`: it has none.
    pub fn task_left(&self) -> Option<f64> {
        let cap = self.caps.lock().unwrap_or_else(|p| p.into_inner()).task?;
        Some((cap - self.task_spent()).max(0.0))
    }

    /// The repository's own caps (`.forgehand.yaml`): each lowers the
    /// operator's, never raises it.
    pub fn lower_to(&self, task: Option<f64>, daily: Option<f64>, monthly: Option<f64>) {
        let mut caps = self.caps.lock().unwrap_or_else(|p| p.into_inner());
        caps.task = lower(caps.task, task);
        caps.repository_daily = lower(caps.repository_daily, daily);
        caps.repository_monthly = lower(caps.repository_monthly, monthly);
    }

    /// Whether any cap applies (else nothing needs checking).
    pub fn capped(&self) -> bool {
        let caps = *self.caps.lock().unwrap_or_else(|p| p.into_inner());
        [
            caps.task,
            caps.repository_daily,
            caps.repository_monthly,
            caps.daemon_daily,
            caps.daemon_monthly,
        ]
        .iter()
        .any(Option::is_some)
    }

    /// What the task has spent so far.
    pub fn task_spent(&self) -> f64 {
        *self.task_spent.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What `usage` of `model` costs; 0 for a model without a price.
    pub fn cost(&self, model: &str, usage: TokenUsage) -> f64 {
        self.prices.cost_of(model, usage).unwrap_or(0.0)
    }

    /// The price of `model`, if it has one.
    pub fn price(&self, model: &str) -> Option<Price> {
        self.prices.price_of(model)
    }

    /// The tightest cap now: what is left under it (never below zero).
    /// `None`: no cap applies.
    pub fn room(&self) -> Option<Room> {
        let caps = *self.caps.lock().unwrap_or_else(|p| p.into_inner());
        let task = caps.task.map(|cap| Room {
            key: self.task_key,
            cap,
            spent: self.task_spent(),
        });
        let periods = match period_rooms(&caps, &self.journal, &self.repo, Period::now()) {
            Ok(rooms) => rooms,
            Err(e) => {
                // A ledger that cannot be read stops no work; the task cap still holds.
                tracing::warn!(repo = %self.repo, "cannot read the spend ledger: {e}");
                Vec::new()
            }
        };
        task.into_iter()
            .chain(periods)
            .min_by(|a, b| a.left().total_cmp(&b.left()))
    }

    /// Counts one answer of `model`.
    pub fn record(&self, model: &str, usage: TokenUsage) {
        let usd = self.cost(model, usage);
        *self.task_spent.lock().unwrap_or_else(|p| p.into_inner()) += usd;
        if usd > 0.0 && self.ledger {
            self.metrics.spend(&self.repo, model, usd);
            if let Err(e) = self
                .journal
                .record_spend(&Period::now().day(), &self.repo, model, usd)
            {
                tracing::warn!(repo = %self.repo, "cannot write the spend ledger: {e}");
            }
        }
    }
}

/// What is left under one cap.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Room {
    /// The setting: `budget.task_usd`, `budget.repository_daily_usd`, ….
    pub key: &'static str,
    pub cap: f64,
    pub spent: f64,
}

impl Room {
    pub fn left(&self) -> f64 {
        (self.cap - self.spent).max(0.0)
    }
}

/// The period caps that apply, with what each period has spent.
fn period_rooms(caps: &Caps, journal: &Journal, repo: &str, now: Period) -> Result<Vec<Room>, JournalError> {
    let mut rooms = Vec::new();
    for (key, cap, whose, monthly) in period_checks(caps, repo) {
        let Some(cap) = cap else { continue };
        let first = if monthly { now.month_first_day() } else { now.day() };
        rooms.push(Room {
            key,
            cap,
            spent: journal.spent(whose, &first, &now.day())?,
        });
    }
    Ok(rooms)
}

/// Each period cap: its key, value, whose spend it caps, and whether it is monthly.
fn period_checks<'r>(caps: &Caps, repo: &'r str) -> [(&'static str, Option<f64>, Whose<'r>, bool); 4] {
    [
        (
            "budget.repository_daily_usd",
            caps.repository_daily,
            Whose::Repository(repo),
            false,
        ),
        (
            "budget.repository_monthly_usd",
            caps.repository_monthly,
            Whose::Repository(repo),
            true,
        ),
        (
            "budget.daemon_daily_usd",
            caps.daemon_daily,
            Whose::Everyone,
            false,
        ),
        (
            "budget.daemon_monthly_usd",
            caps.daemon_monthly,
            Whose::Everyone,
            true,
        ),
    ]
}

/// The first period cap that spending `more` now would pass.
fn over_period_caps(
    caps: &Caps,
    journal: &Journal,
    repo: &str,
    more: f64,
    now: Period,
) -> Result<Option<OverCap>, JournalError> {
    let checks = period_checks(caps, repo);
    for (key, cap, whose, monthly) in checks {
        let Some(cap) = cap else { continue };
        let (first, last, turns) = match monthly {
            true => (now.month_first_day(), now.day(), now.next_month()),
            false => (now.day(), now.day(), now.next_day()),
        };
        let spent = journal.spent(whose, &first, &last)?;
        if spent >= cap || spent + more > cap {
            return Ok(Some(OverCap {
                key,
                cap,
                spent,
                turns: Some(turns),
            }));
        }
    }
    Ok(None)
}

/// Whether a new item of `repo` waits for a period to turn: its
/// repository's or the daemon's spend has reached a cap, or would pass it
/// with a whole task's cap (`budget.task_usd`) more.
pub fn waits(
    config: &BudgetConfig,
    journal: &Journal,
    repo: &str,
    now: Period,
) -> Result<Option<OverCap>, JournalError> {
    let caps = Caps::from(config);
    let task = caps.task.unwrap_or(0.0);
    let mut over = over_period_caps(&caps, journal, repo, 0.0, now)?;
    if over.is_none() && task > 0.0 {
        // A task's worst case, but never so much that nothing could run.
        over = over_period_caps(&caps, journal, repo, task, now)?.filter(|o| o.spent > 0.0 && task < o.cap);
    }
    Ok(over)
}

#[cfg(test)]
mod tests;
