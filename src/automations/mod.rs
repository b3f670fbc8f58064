//! Scheduled automations: at each time of an automation's cron schedule
//! (read in its time zone), forgehand opens its issue in each of its
//! repositories, labelled with the trigger label so the usual intake works
//! it, unless the automation's previous issue is still open there. After
//! downtime at most one missed time is caught up, and only within the
//! automation's starting deadline, as Kubernetes CronJobs do. The last
//! time decided per automation and repository is in the journal; among
//! replicas one Lease per automation and repository says who opens it.
//!
//! - [`schedule`]: next times, and the one decision (fire, catch up, too late);
//! - [`issue`]: the issue's body and the marker line that finds it again;
//! - [`runner`]: one look at every automation, on the forges and the journal;
//! - [`clock`]: the wall clock, drivable by tests.

pub mod clock;
pub mod issue;
pub mod runner;
pub mod schedule;

pub use clock::{Clock, FileClock, SystemClock};

#[cfg(test)]
mod tests;
pub use runner::Automations;
