//! The runner against an in-memory forge, the journal and a clock the
//! test sets: each decision once, the marker finding an issue opened
//! before a restart, a forge that fails leaving the time to the next look.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::runner::Automations;
use super::Clock;
use crate::config::{parse_schedule, AutomationConfig, AutomationForge, AutomationTarget, Config};
use crate::forge::{ForgeError, ForgeKind, Item, ItemKind, ItemRef, NewIssue, Opener};
use crate::journal::{Journal, RunOutcome};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

struct SetClock(Mutex<DateTime<Utc>>);

impl SetClock {
    fn set(&self, at: &str) {
        *self.0.lock().unwrap() = utc(at);
    }
}

impl Clock for SetClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap()
    }
}

fn utc(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
}

/// Issues in memory; `down` makes every call fail as an unreachable forge.
#[derive(Default)]
struct Issues {
    items: Mutex<Vec<Item>>,
    down: AtomicBool,
}

impl Issues {
    fn add(&self, title: &str, body: &str, labels: Vec<String>) -> Item {
        let mut items = self.items.lock().unwrap();
        let number = items.len() as u64 + 1;
        let item = Item {
            reference: ItemRef {
                forge: ForgeKind::GitHub,
                repo: "acme/app".into(),
                kind: ItemKind::Issue,
                number,
            },
            title: title.into(),
            body: body.into(),
            author: "forgehand-bot".into(),
            labels,
            open: true,
            web_url: format!("https://github.example/acme/app/issues/{number}"),
            updated_at: String::new(),
        };
        items.push(item.clone());
        item
    }

    fn close_all(&self) {
        for item in self.items.lock().unwrap().iter_mut() {
            item.open = false;
        }
    }

    fn count(&self) -> usize {
        self.items.lock().unwrap().len()
    }

    fn check(&self) -> Result<(), ForgeError> {
        match self.down.load(Ordering::SeqCst) {
            true => Err(ForgeError::Network {
                forge: "github",
                what: "the API".into(),
                message: "connection refused".into(),
            }),
            false => Ok(()),
        }
    }
}

#[async_trait]
impl Opener for Issues {
    async fn open_issue(&self, _repo: &str, issue: &NewIssue) -> Result<Item, ForgeError> {
        self.check()?;
        Ok(self.add(&issue.title, &issue.body, issue.labels.clone()))
    }

    async fn find_open_issue(&self, _repo: &str, marker: &str) -> Result<Option<Item>, ForgeError> {
        self.check()?;
        let items = self.items.lock().unwrap();
        Ok(items
            .iter()
            .rev()
            .find(|i| i.open && i.body.contains(marker))
            .cloned())
    }
}

struct Rig {
    clock: Arc<SetClock>,
    issues: Arc<Issues>,
    journal: Journal,
    automations: Automations,
    _dir: tempfile::TempDir,
}

impl Rig {
    fn new(schedule: &str) -> Rig {
        let mut config = Config::defaults();
        config.automations.push(AutomationConfig {
            name: "chore".into(),
            schedule_text: schedule.into(),
            schedule: parse_schedule(schedule).unwrap(),
            timezone: chrono_tz::UTC,
            repositories: vec![AutomationTarget {
                forge: AutomationForge::GitHub,
                repo: "acme/app".into(),
            }],
            title: "Tidy".into(),
            instructions: "Tidy up.".into(),
            labels: vec!["chore".into()],
            starting_deadline: Duration::from_secs(30 * 60),
        });
        let clock = Arc::new(SetClock(Mutex::new(utc("2026-12-08T10:00:30Z"))));
        let dir = tempfile::tempdir().unwrap();
        Rig {
            automations: Automations::new(&config, clock.clone(), None),
            clock,
            issues: Arc::default(),
            journal: Journal::open(dir.path()).unwrap(),
            _dir: dir,
        }
    }

    async fn look_at(&self, at: &str) {
        self.clock.set(at);
        let forges: BTreeMap<ForgeKind, Arc<dyn Opener>> =
            BTreeMap::from([(ForgeKind::GitHub, self.issues.clone() as Arc<dyn Opener>)]);
        self.automations.look(&forges, &self.journal).await;
    }

    fn last(&self) -> (String, RunOutcome, Option<u64>) {
        let run = self
            .journal
            .automation_run("chore", "github:acme/app")
            .unwrap()
            .unwrap();
        let slot = DateTime::from_timestamp(run.slot, 0).unwrap();
        (
            slot.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            run.outcome,
            run.issue,
        )
    }
}

#[tokio::test]
async fn each_time_is_decided_once_and_an_open_issue_skips_the_next() {
    let rig = Rig::new("* * * * *");
    rig.look_at("2026-12-08T10:00:30Z").await;
    assert_eq!(
        rig.last(),
        ("2026-12-08T10:00:30Z".into(), RunOutcome::Started, None)
    );
    assert_eq!(rig.issues.count(), 0, "times before the first look are not runs");

    rig.look_at("2026-12-08T10:01:00Z").await;
    rig.look_at("2026-12-08T10:01:20Z").await;
    assert_eq!(rig.issues.count(), 1);
    assert_eq!(
        rig.last(),
        ("2026-12-08T10:01:00Z".into(), RunOutcome::Fired, Some(1))
    );
    let first = rig.issues.items.lock().unwrap()[0].clone();
    assert_eq!(first.labels, vec!["coding agent".to_owned(), "chore".to_owned()]);

    rig.look_at("2026-12-08T10:02:00Z").await;
    assert_eq!(rig.issues.count(), 1);
    assert_eq!(
        rig.last(),
        ("2026-12-08T10:02:00Z".into(), RunOutcome::Skipped, Some(1))
    );

    // Down for three times: the latest alone runs, once.
    rig.issues.close_all();
    rig.look_at("2026-12-08T10:05:10Z").await;
    rig.look_at("2026-12-08T10:05:40Z").await;
    assert_eq!(rig.issues.count(), 2);
    assert_eq!(
        rig.last(),
        ("2026-12-08T10:05:00Z".into(), RunOutcome::Fired, Some(2))
    );

    // Beyond the deadline (30 min): missed, nothing opened.
    rig.issues.close_all();
    rig.look_at("2026-12-08T11:00:00Z").await;
    assert_eq!(rig.issues.count(), 3, "11:00 is on time");
    rig.issues.close_all();
    let hourly = Rig::new("0 * * * *");
    hourly.look_at("2026-12-08T09:59:00Z").await;
    hourly.look_at("2026-12-08T10:45:00Z").await;
    assert_eq!(hourly.issues.count(), 0);
    assert_eq!(
        hourly.last(),
        ("2026-12-08T10:00:00Z".into(), RunOutcome::Missed, None)
    );
}

#[tokio::test]
async fn a_forge_that_fails_leaves_the_time_to_the_next_look() {
    let rig = Rig::new("* * * * *");
    rig.look_at("2026-12-08T10:00:30Z").await;
    rig.issues.down.store(true, Ordering::SeqCst);
    rig.look_at("2026-12-08T10:01:00Z").await;
    assert_eq!(
        rig.last().1,
        RunOutcome::Started,
        "nothing decided while the forge is down"
    );
    rig.issues.down.store(false, Ordering::SeqCst);
    rig.look_at("2026-12-08T10:01:30Z").await;
    assert_eq!(rig.issues.count(), 1);
    assert_eq!(
        rig.last(),
        ("2026-12-08T10:01:00Z".into(), RunOutcome::Fired, Some(1))
    );
}

#[tokio::test]
async fn an_issue_opened_before_a_restart_is_found_by_its_marker_not_opened_again() {
    let rig = Rig::new("* * * * *");
    rig.look_at("2026-12-08T10:00:30Z").await;
    // The issue for 10:01 is on the forge; the journal never heard of it.
    let body = super::issue::new_issue(&rig_automation(), utc("2026-12-08T10:01:00Z"), "coding agent").body;
    rig.issues.add("Tidy", &body, vec![]);
    rig.look_at("2026-12-08T10:01:05Z").await;
    assert_eq!(rig.issues.count(), 1, "not opened twice");
    assert_eq!(
        rig.last(),
        ("2026-12-08T10:01:00Z".into(), RunOutcome::Fired, Some(1))
    );
}

fn rig_automation() -> AutomationConfig {
    AutomationConfig {
        name: "chore".into(),
        schedule_text: "* * * * *".into(),
        schedule: parse_schedule("* * * * *").unwrap(),
        timezone: chrono_tz::UTC,
        repositories: vec![],
        title: "Tidy".into(),
        instructions: "Tidy up.".into(),
        labels: vec![],
        starting_deadline: Duration::from_secs(1800),
    }
}
