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
