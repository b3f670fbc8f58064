//! `forgehand tasks`: the journal's tasks and runs, and one run's transcript.

use crate::TasksCommand;
use forgehand::config::Config;
use std::io::Write;
use std::process::ExitCode;

/// `forgehand tasks [show ID [--jsonl]]`.
pub(crate) fn show(config: &Config, command: Option<TasksCommand>) -> anyhow::Result<ExitCode> {
    let journal = forgehand::journal::Journal::open(&config.daemon.state_dir)?;
    let text = match command {
        None => {
            let mut text = forgehand::journal::render_tasks(&journal.unfinished()?, &journal.ended(50)?);
            text.push('\n');
            text.push_str(&render_waiting(&journal.waiting()?));
            text.push('\n');
            text.push_str(&forgehand::transcript::render_runs(&journal.runs(20)?));
            text
        }
        Some(TasksCommand::Show { id, jsonl }) => {
            let shown = match jsonl {
                true => forgehand::transcript::render_jsonl(&journal, id)?,
                false => forgehand::transcript::render_text(&journal, id)?,
            };
            match shown {
                Some(text) => text,
                None => {
                    eprintln!("no run {id} in {}; `forgehand tasks` lists the runs kept (daemon.transcript_retention)", config.daemon.state_dir.display());
                    return Ok(ExitCode::FAILURE);
                }
            }
        }
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// The tasks that wait holding nothing, and on what (a running daemon
/// starts each again when its wait ends).
fn render_waiting(waiting: &[forgehand::journal::Waiting]) -> String {
    let mut out = format!("Waiting ({}):\n", waiting.len());
    if waiting.is_empty() {
        out.push_str("  none\n");
    }
    for wait in waiting {
        let name = forgehand::forge::ItemRef::parse_key(&wait.key)
            .map(|i| i.to_string())
            .unwrap_or_else(|| wait.key.clone());
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(wait.since.max(0) as u64);
        let since = humantime::format_rfc3339_seconds(at);
        out.push_str(&format!("  {name:<40} since {since}  on {}\n", wait.on));
    }
    out
}
