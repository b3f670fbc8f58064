//! `forgehand automations list`: each scheduled automation, its next
//! times, and what it last did in each repository (from the journal).

use forgehand::config::Config;
use std::io::Write;
use std::process::ExitCode;

/// `forgehand automations list [--next N]`.
pub(crate) fn list(config: &Config, next: usize) -> anyhow::Result<ExitCode> {
    let journal = forgehand::journal::Journal::open(&config.daemon.state_dir)?;
    let runs = journal.automation_runs()?;
    let now = forgehand::automations::clock::from_env().now();
    let text = forgehand::automations::runner::render_list(config, &runs, now, next.max(1));
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
