//! systemd's notify protocol (`Type=notify`), through `sd-notify`:
//! `READY=1` once the first reconcile has finished, `WATCHDOG=1` from the
//! poll loop (a hung loop stops sending it and systemd restarts the
//! service), `STATUS=` lines an operator sees in `systemctl status`, and
//! `STOPPING=1` on shutdown. Outside systemd (no `NOTIFY_SOCKET`) every
//! call does nothing.

use sd_notify::NotifyState;
use std::time::Duration;

pub struct Notifier {
    ready_sent: bool,
    /// `WatchdogSec=` as systemd passed it, when set.
    watchdog: Option<Duration>,
}

impl Notifier {
    pub fn from_env() -> Notifier {
        let watchdog = watchdog_from(
            std::env::var("WATCHDOG_USEC").ok().as_deref(),
            std::env::var("WATCHDOG_PID").ok().as_deref(),
            std::process::id(),
        );
        if let Some(every) = watchdog {
            tracing::info!(
                "systemd watchdog every {} s; the poll loop pings it",
                every.as_secs()
            );
        }
        Notifier {
            ready_sent: false,
            watchdog,
        }
    }

    /// The watchdog interval systemd asked for, if any.
    pub fn watchdog(&self) -> Option<Duration> {
        self.watchdog
    }

    fn send(&self, states: &[NotifyState<'_>]) {
        if let Err(e) = sd_notify::notify(false, states) {
            tracing::debug!("cannot notify systemd: {e}");
        }
    }

    /// `READY=1`, once.
    pub fn ready(&mut self) {
        if !self.ready_sent {
            self.ready_sent = true;
            self.send(&[NotifyState::Ready]);
        }
    }

    /// The loop is alive (`WATCHDOG=1`), with what it is doing (`STATUS=`).
    pub fn alive(&self, status: &str) {
        if self.watchdog.is_some() {
            self.send(&[NotifyState::Watchdog, NotifyState::Status(status)]);
        } else {
            self.send(&[NotifyState::Status(status)]);
        }
    }

    pub fn stopping(&self) {
        self.send(&[
            NotifyState::Stopping,
            NotifyState::Status("stopping: no new tasks"),
        ]);
    }
}

/// The watchdog interval, as libsystemd's `sd_watchdog_enabled` reads it:
/// `WATCHDOG_USEC` set, and `WATCHDOG_PID` either unset or this process.
/// (`sd_notify::watchdog_enabled` also demands `WATCHDOG_PID`.)
fn watchdog_from(usec: Option<&str>, pid: Option<&str>, own_pid: u32) -> Option<Duration> {
    let usec: u64 = usec?.trim().parse().ok().filter(|u| *u > 0)?;
    match pid.map(|p| p.trim().parse::<u32>()) {
        None => {}
        Some(Ok(pid)) if pid == own_pid => {}
        Some(_) => return None,
    }
    Some(Duration::from_micros(usec))
}

/// "3 tasks running, 1 queued, next poll in 41 s".
pub fn status_line(running: usize, queued: usize, next_poll: Duration) -> String {
    let tasks = match running {
        1 => "1 task running".to_owned(),
        n => format!("{n} tasks running"),
    };
    let queued = if queued > 0 {
        format!(", {queued} queued")
    } else {
        String::new()
    };
    format!("{tasks}{queued}, next poll in {} s", next_poll.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_is_ours_unless_another_pid_is_named() {
        let every = Some(Duration::from_secs(30));
        assert_eq!(watchdog_from(Some("30000000"), None, 7), every);
        assert_eq!(watchdog_from(Some("30000000"), Some("7"), 7), every);
        assert_eq!(watchdog_from(Some("30000000"), Some("8"), 7), None);
        assert_eq!(watchdog_from(None, Some("7"), 7), None);
        assert_eq!(watchdog_from(Some("0"), None, 7), None);
    }

    #[test]
    fn the_status_line_reads_naturally() {
        assert_eq!(
            status_line(3, 0, Duration::from_secs(41)),
            "3 tasks running, next poll in 41 s"
        );
        assert_eq!(
            status_line(1, 2, Duration::from_secs(5)),
            "1 task running, 2 queued, next poll in 5 s"
        );
    }
}
