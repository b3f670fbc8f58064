//! One look at every automation in every repository: what the schedule
//! says is due is decided once, journalled, and (for a run) opened on the
//! forge unless the automation's previous issue is still open there.
//! A forge or API server that does not answer leaves the time undecided:
//! the next look tries it again while it is within the deadline.

use super::issue;
use super::schedule::{self, Due};
use super::Clock;
use crate::config::{AutomationConfig, AutomationForge, AutomationTarget, Config};
use crate::forge::{ForgeKind, Opener};
use crate::journal::{AutomationRun, Journal, JournalError, RunOutcome};
use crate::replicas::slots::{SlotLeases, Taken};
use chrono::{DateTime, SecondsFormat, Utc};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The daemon's automations, their clock, and among replicas the Leases
/// that say who opens each time.
pub struct Automations {
    list: Vec<AutomationConfig>,
    trigger: String,
    clock: Arc<dyn Clock>,
    slots: Option<SlotLeases>,
}

/// The forge kind an automation's repository is on.
pub fn forge_kind(forge: AutomationForge) -> ForgeKind {
    match forge {
        AutomationForge::GitHub => ForgeKind::GitHub,
        AutomationForge::GitLab => ForgeKind::GitLab,
    }
}

/// The journal's (and the Lease's) name of a repository: `github:owner/name`.
pub fn repository_key(target: &AutomationTarget) -> String {
    format!("{}:{}", forge_kind(target.forge).as_str(), target.repo)
}

fn stamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn from_secs(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(secs, 0).unwrap_or_default()
}

impl Automations {
    pub fn new(config: &Config, clock: Arc<dyn Clock>, slots: Option<SlotLeases>) -> Automations {
        Automations {
            list: config.automations.clone(),
            trigger: config.labels.trigger.clone(),
            clock,
            slots,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// How long until the next look: the nearest next time, at most the
    /// clock's longest sleep.
    pub fn next_look_in(&self) -> Duration {
        let now = self.clock.now();
        let nearest = self
            .list
            .iter()
            .filter_map(|a| schedule::next_after(&a.schedule, a.timezone, now))
            .min();
        let until = nearest.map_or(Duration::MAX, |t| (t - now).to_std().unwrap_or_default());
        until.clamp(Duration::from_millis(50), self.clock.max_sleep())
    }

    /// Decides every automation in every repository at the clock's now.
    pub async fn look(&self, forges: &BTreeMap<ForgeKind, Arc<dyn Opener>>, journal: &Journal) {
        let now = self.clock.now();
        for automation in &self.list {
            for target in &automation.repositories {
                let Some(forge) = forges.get(&forge_kind(target.forge)) else {
                    tracing::warn!(automation = %automation.name, repo = %target.repo, "the automation's forge is not connected; not run");
                    continue;
                };
                let look = Look {
                    automation,
                    target,
                    repository: repository_key(target),
                    forge: forge.as_ref(),
                    journal,
                    now,
                };
                if let Err(e) = self.decide(&look).await {
                    tracing::error!(automation = %automation.name, repo = %target.repo, "cannot journal the automation's run: {e}");
                }
            }
        }
        tracing::debug!(now = %stamp(now), "looked at the automations");
    }

    /// One automation in one repository.
    async fn decide(&self, look: &Look<'_>) -> Result<(), JournalError> {
        let (automation, target) = (look.automation, look.target);
        let Some(last) = look.journal.automation_run(&automation.name, &look.repository)? else {
            tracing::info!(automation = %automation.name, repo = %target.repo, "automation scheduled; its times count from now");
            return look.record(look.now.timestamp(), RunOutcome::Started, None);
        };
        let decided = schedule::due(
            &automation.schedule,
            automation.timezone,
            from_secs(last.slot),
            look.now,
            automation.starting_deadline,
        );
        match decided {
            Due::Nothing => Ok(()),
            Due::TooLate {
                slot,
                passed_over,
                late,
            } => {
                tracing::warn!(
                    automation = %automation.name,
                    repo = %target.repo,
                    slot = %stamp(slot),
                    passed_over,
                    "missed beyond the starting deadline ({} late, the deadline is {}); not run",
                    humantime::format_duration(Duration::from_secs(late.as_secs())),
                    humantime::format_duration(automation.starting_deadline)
                );
                look.record(slot.timestamp(), RunOutcome::Missed, None)
            }
            Due::Run { slot, .. } => self.run(look, slot, decided.is_catch_up()).await,
        }
    }

    /// The time `slot` is due: taken among replicas, then opened unless
    /// the previous issue is still open.
    async fn run(&self, look: &Look<'_>, slot: DateTime<Utc>, catch_up: bool) -> Result<(), JournalError> {
        let (automation, target) = (look.automation, look.target);
        if !self.taken_here(look, slot).await? {
            return Ok(());
        }
        let marker = issue::marker(&automation.name);
        let open = match look.forge.find_open_issue(&target.repo, &marker).await {
            Ok(open) => open,
            Err(e) => {
                tracing::warn!(automation = %automation.name, repo = %target.repo, slot = %stamp(slot), "cannot look for the automation's open issue ({e}); trying again at the next look");
                return Ok(());
            }
        };
        let Some(open) = open else {
            return self.open(look, slot, catch_up).await;
        };
        let number = open.reference.number;
        if issue::slot_of(&open.body, &automation.name) == Some(slot) {
            tracing::info!(automation = %automation.name, repo = %target.repo, slot = %stamp(slot), issue = number, "this time's issue is open already (opened before a restart)");
            return look.record(slot.timestamp(), RunOutcome::Fired, Some(number));
        }
        tracing::info!(automation = %automation.name, repo = %target.repo, slot = %stamp(slot), issue = number, "skipped: its previous issue #{number} is still open");
        look.record(slot.timestamp(), RunOutcome::Skipped, Some(number))
    }

    /// Whether this daemon opens `slot`: always alone; among replicas when
    /// its Lease write lands (another's is journalled as such).
    async fn taken_here(&self, look: &Look<'_>, slot: DateTime<Utc>) -> Result<bool, JournalError> {
        let Some(slots) = &self.slots else {
            return Ok(true);
        };
        let (automation, target) = (look.automation, look.target);
        match slots
            .take(&automation.name, &look.repository, slot.timestamp())
            .await
        {
            Ok(Taken::Mine) => Ok(true),
            Ok(Taken::Elsewhere(taken)) => {
                tracing::info!(automation = %automation.name, repo = %target.repo, slot = %stamp(slot), "another replica runs this time");
                look.record(taken, RunOutcome::Elsewhere, None).map(|()| false)
            }
            Err(e) => {
                tracing::warn!(automation = %automation.name, repo = %target.repo, slot = %stamp(slot), "cannot take the time among the replicas now ({e}); trying again at the next look");
                Ok(false)
            }
        }
    }

    /// Opens the issue of `slot`, labelled.
    async fn open(&self, look: &Look<'_>, slot: DateTime<Utc>, catch_up: bool) -> Result<(), JournalError> {
        let (automation, target) = (look.automation, look.target);
        let new = issue::new_issue(automation, slot, &self.trigger);
        let opened = match look.forge.open_issue(&target.repo, &new).await {
            Ok(opened) => opened,
            Err(e) => {
                tracing::warn!(automation = %automation.name, repo = %target.repo, slot = %stamp(slot), "cannot open the automation's issue ({e}); trying again at the next look");
                return Ok(());
            }
        };
        let number = opened.reference.number;
        if !opened.has_label(&self.trigger) {
            // GitHub drops the labels of an account without push access.
            tracing::warn!(automation = %automation.name, repo = %target.repo, issue = number, label = %self.trigger, "the forge did not keep the trigger label on the new issue, so no task starts for it; forgehand's account needs push access (GitHub) or the Reporter role (GitLab) to label issues");
        }
        let what = match catch_up {
            true => "caught up a missed run",
            false => "fired",
        };
        tracing::info!(automation = %automation.name, repo = %target.repo, slot = %stamp(slot), issue = number, url = %opened.web_url, "{what}: opened issue #{number}");
        look.record(slot.timestamp(), RunOutcome::Fired, Some(number))
    }
}

/// What one decision looks at.
struct Look<'a> {
    automation: &'a AutomationConfig,
    target: &'a AutomationTarget,
    repository: String,
    forge: &'a dyn Opener,
    journal: &'a Journal,
    now: DateTime<Utc>,
}

impl Look<'_> {
    fn record(&self, slot: i64, outcome: RunOutcome, issue: Option<u64>) -> Result<(), JournalError> {
        self.journal.record_automation_run(&AutomationRun {
            automation: self.automation.name.clone(),
            repository: self.repository.clone(),
            slot,
            outcome,
            issue,
            at: self.now.timestamp(),
        })
    }
}

/// An automation's next times and last decisions, for `forgehand
/// automations list`.
pub fn render_list(config: &Config, runs: &[AutomationRun], now: DateTime<Utc>, count: usize) -> String {
    let mut out = format!("Automations ({}):\n", config.automations.len());
    if config.automations.is_empty() {
        out.push_str("  none (automations: in the config)\n");
    }
    for a in &config.automations {
        out.push_str(&format!(
            "\n{}  \"{}\"  schedule \"{}\" in {}, starting deadline {}\n",
            a.name,
            a.title,
            a.schedule_text,
            a.timezone.name(),
            humantime::format_duration(a.starting_deadline)
        ));
        out.push_str("  next:\n");
        for t in schedule::next_times(&a.schedule, a.timezone, now, count) {
            out.push_str(&format!(
                "    {}  ({})\n",
                t.with_timezone(&a.timezone).format("%Y-%m-%d %H:%M %Z"),
                t.format("%Y-%m-%d %H:%M UTC")
            ));
        }
        for target in &a.repositories {
            let key = repository_key(target);
            let last = runs
                .iter()
                .find(|r| r.automation == a.name && r.repository == key);
            out.push_str(&format!("  {key:<40} {}\n", describe_last(last)));
        }
    }
    out
}

fn describe_last(last: Option<&AutomationRun>) -> String {
    let Some(run) = last else {
        return "not looked at yet".into();
    };
    let slot = stamp(from_secs(run.slot));
    let issue = run.issue.map(|n| format!(" #{n}")).unwrap_or_default();
    match run.outcome {
        RunOutcome::Started => format!("counting from {slot}; not fired yet"),
        RunOutcome::Fired => format!("last fired for {slot}:{issue}"),
        RunOutcome::Skipped => format!("last skipped at {slot}:{issue} was still open"),
        RunOutcome::Missed => format!("last missed {slot} (beyond the starting deadline)"),
        RunOutcome::Elsewhere => format!("last ran {slot} on another replica"),
    }
}
