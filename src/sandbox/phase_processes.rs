//! Ending what a phase started. A setup command that calls `setsid`, or
//! double-forks, leaves its process group, so the group kill at its end
//! misses it; it would then run on beside the model, with whatever the
//! agent phase may reach. When a phase ends, every process that started
//! during it is killed, found by its start time (which the kernel sets and
//! a process cannot change), not by its group or its name. What ran before
//! the phase (the sandbox's init, the supervisor, an editor session) stays.

use super::{Sandbox, SandboxError};
use std::time::Duration;

/// How long finding and killing may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// When a phase began, in the kernel's clock ticks since boot (the unit of
/// a process's start time in `/proc/PID/stat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhaseStart(u64);

/// The start time of the shell that reads it. Ticks are coarse (10 ms), and
/// a command over the supervisor takes about 1 ms, so what started just
/// before may share this tick: [`phase_start`] lets the tick pass, and only
/// what started at a later tick belongs to the phase.
const READ_START: &str = r#"read -r line < /proc/self/stat; set -f; set -- ${line##*) }; echo "start=${20}""#;

/// Kills (SIGKILL) every process that started after the tick `$T0`, except
/// this shell's own ancestors (the supervisor, or the exec that runs it)
/// and zombies, in passes until no new one is found, so a process forking
/// while it is scanned is caught on the next pass; each is counted once. Only shell builtins: the
/// script starts no process of its own. Prints `ended=N`. (No `set -f`:
/// the scan needs its glob, and a stat line after its `)` holds no glob
/// characters.)
const END_PHASE: &str = r#"keep=" "
p=$$
while [ "${p:-0}" -gt 0 ]; do
  keep="$keep$p "
  next=0
  while read -r key value; do
    if [ "$key" = "PPid:" ]; then next=$value; break; fi
  done 2>/dev/null < "/proc/$p/status"
  p=$next
done
ended=0
killed=" "
for pass in 1 2 3 4 5 6 7 8; do
  found=0
  for dir in /proc/[0-9]*; do
    pid=${dir#/proc/}
    case "$keep" in *" $pid "*) continue ;; esac
    line=
    read -r line 2>/dev/null < "$dir/stat" || continue
    set -- ${line##*) }
    [ "$1" = Z ] && continue
    [ "${20:-0}" -gt "$T0" ] || continue
    # Killed on an earlier pass and not yet dead: not counted again.
    case "$killed" in *" $pid "*) kill -9 "$pid" 2>/dev/null; continue ;; esac
    if kill -9 "$pid" 2>/dev/null; then
      found=$((found + 1))
      killed="$killed$pid "
    fi
  done
  ended=$((ended + found))
  [ "$found" -eq 0 ] && break
done
echo "ended=$ended""#;

/// The length of a tick of a process's start time (`USER_HZ` is 100 on
/// every Linux), with room to spare.
const TICK: Duration = Duration::from_millis(20);

/// Marks the start of a phase in `sandbox`; what it starts from now on
/// belongs to the phase.
pub async fn phase_start(sandbox: &dyn Sandbox) -> Result<PhaseStart, SandboxError> {
    let output = sandbox.exec(READ_START, Some(TIMEOUT)).await?;
    let start = value_of(&output.stdout, "start");
    // Processes that start from here on have a later tick than the mark.
    tokio::time::sleep(TICK).await;
    start.map(PhaseStart).ok_or_else(|| SandboxError::InSandbox {
        action: "read the clock of the phase's start".into(),
        detail: format!(
            "`/proc/self/stat` gave no start time (exit {:?}): {}",
            output.exit_code,
            output.stderr.trim()
        ),
    })
}

/// Kills what started in `sandbox` since `start`; how many processes that was.
pub async fn end_phase(sandbox: &dyn Sandbox, start: PhaseStart) -> Result<u64, SandboxError> {
    let script = format!("T0={}\n{END_PHASE}", start.0);
    let output = sandbox.exec(&script, Some(TIMEOUT)).await?;
    value_of(&output.stdout, "ended").ok_or_else(|| SandboxError::InSandbox {
        action: "end the processes the phase left running".into(),
        detail: format!(
            "the script did not finish (exit {:?}{}): {}",
            output.exit_code,
            if output.timed_out { ", timed out" } else { "" },
            output.stderr.trim()
        ),
    })
}

/// The number after `name=` on a line of `stdout`.
fn value_of(stdout: &str, name: &str) -> Option<u64> {
    stdout
        .lines()
        .find_map(|line| line.trim().strip_prefix(&format!("{name}=")))
        .and_then(|value| value.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_read_from_their_own_line_only() {
        assert_eq!(value_of("noise\nended=3\n", "ended"), Some(3));
        assert_eq!(value_of("start=\n", "start"), None);
        assert_eq!(value_of("xended=3\n", "ended"), None);
    }
}
