//! The wall clock the automations read. A test drives it through a file
//! (`FORGEHAND_TEST_CLOCK_FILE`: an RFC 3339 time, rewritten by the test)
//! so a schedule of every minute is proved one tick at a time without
//! sleeping minutes. Unset (always, outside those tests), it is the
//! system's clock.

use chrono::{DateTime, Utc};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The environment variable naming the test's clock file.
pub const CLOCK_FILE_ENV: &str = "FORGEHAND_TEST_CLOCK_FILE";

pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;

    /// The longest the daemon sleeps between two looks at the schedules:
    /// the system clock may be set (NTP, a VM resumed), so it is read
    /// again at least this often.
    fn max_sleep(&self) -> Duration {
        Duration::from_secs(30)
    }
}

/// The system's clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// The time written in a file: what a test says it is.
pub struct FileClock {
    path: PathBuf,
}

impl FileClock {
    pub fn new(path: PathBuf) -> FileClock {
        FileClock { path }
    }
}

impl Clock for FileClock {
    fn now(&self) -> DateTime<Utc> {
        let text = std::fs::read_to_string(&self.path).unwrap_or_default();
        match DateTime::parse_from_rfc3339(text.trim()) {
            Ok(at) => at.with_timezone(&Utc),
            Err(e) => {
                tracing::warn!(path = %self.path.display(), "the test clock's file holds no RFC 3339 time ({e}); using the system clock");
                Utc::now()
            }
        }
    }

    /// The test moves the time at once: look often.
    fn max_sleep(&self) -> Duration {
        Duration::from_millis(200)
    }
}

/// The clock the environment asks for: the test's file, or the system's.
pub fn from_env() -> Arc<dyn Clock> {
    match std::env::var_os(CLOCK_FILE_ENV) {
        Some(path) if !path.is_empty() => {
            tracing::warn!(path = %PathBuf::from(&path).display(), "automations read the time from a test's clock file ({CLOCK_FILE_ENV})");
            Arc::new(FileClock::new(PathBuf::from(path)))
        }
        _ => Arc::new(SystemClock),
    }
}
