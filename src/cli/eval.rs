//! `forgehand eval`: runs instances and scores them, or makes instances
//! from a repository's merged PRs.

use super::shutdown_signal;
use crate::{EvalCommand, EvalForge, EvalRun};
use anyhow::Context;
use forgehand::config::Config;
use forgehand::config::Secrets;
use std::io::Write;
use std::process::ExitCode;
use tokio_util::sync::CancellationToken;

/// `forgehand eval INSTANCES.jsonl`: the table on stdout, the files in `--out`.
pub(crate) async fn evaluate(config: Config, run: EvalRun) -> anyhow::Result<ExitCode> {
    use std::io::IsTerminal;
    let instances = run.instances.context(
        "name the instances file: forgehand eval INSTANCES.jsonl (or `forgehand eval make` to build one)",
    )?;
    let options = forgehand::eval::Options {
        instances: Config::absolute(&instances),
        out: Config::absolute(&run.out),
        concurrency: run.concurrency.max(1),
        model_name: run
            .model_name
            .unwrap_or_else(|| forgehand::eval::default_model_name(&config)),
        test_command: run.test_command,
        test_timeout: run.test_timeout,
        progress: std::io::stderr().is_terminal(),
    };
    let instances = forgehand::eval::read_instances(&options)?;
    let env = forgehand::eval::environment(config, Secrets::from_env(), &options).await?;
    let shutdown = CancellationToken::new();
    let trigger = shutdown.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("interrupted; the instances running now are resumed next time");
        trigger.cancel();
    });
    let results = forgehand::eval::run(env, &instances, &options, shutdown).await?;
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(forgehand::eval::report::table(&results).as_bytes())?;
    writeln!(
        stdout,
        "\nPredictions: {}\nReport: {}",
        options.out.join("preds.jsonl").display(),
        options.out.join("report.json").display()
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `forgehand eval make`: instances from a repository's closed issues.
pub(crate) async fn make_instances(config: Config, command: EvalCommand) -> anyhow::Result<ExitCode> {
    use forgehand::eval::make;
    use forgehand::forge::history::History;
    use forgehand::forge::Delivery;
    let EvalCommand::Make {
        repo,
        since,
        forge,
        test_command,
        out,
    } = command;
    let since = make::parse_since(&since).map_err(anyhow::Error::msg)?;
    let secrets = Secrets::from_env();
    let connected: (Box<dyn History>, String) = match forge {
        EvalForge::Github => {
            let github =
                forgehand::forge::github::GitHub::new(&config.github, &secrets, config.github.api_timeout)?;
            let clone_url = github.repository(&repo).await?.clone_url;
            (Box::new(github), clone_url)
        }
        EvalForge::Gitlab => {
            let gitlab = forgehand::forge::gitlab::GitLab::connect(&config.gitlab, &secrets).await?;
            let clone_url = gitlab.repository(&repo).await?.clone_url;
            (Box::new(gitlab), clone_url)
        }
    };
    let (history, clone_url) = connected;
    let made = make::make(
        history.as_ref(),
        (&repo, &clone_url),
        since,
        test_command.as_deref(),
    )
    .await?;
    let mut text = String::new();
    for instance in &made.instances {
        text.push_str(&serde_json::to_string(instance)?);
        text.push('\n');
    }
    std::fs::write(&out, text).with_context(|| format!("writing {}", out.display()))?;
    let mut stdout = std::io::stdout().lock();
    for skipped in &made.skipped {
        writeln!(stdout, "skipped {skipped}")?;
    }
    writeln!(
        stdout,
        "{} instance(s) from issues of {repo} closed since {} written to {}",
        made.instances.len(),
        since.format("%Y-%m-%d"),
        out.display()
    )?;
    if test_command.is_none() && !made.instances.is_empty() {
        writeln!(stdout, "They have no test command: {}", make::test_command_hint())?;
    }
    Ok(ExitCode::SUCCESS)
}
