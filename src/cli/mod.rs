//! One function per `forgehand` command; `main.rs` parses the arguments
//! and calls the one asked for. The commands that run tasks are here
//! (`run`, `once`) with `doctor`; the others have a module each.

pub(crate) mod artefacts;
pub(crate) mod automations;
pub(crate) mod eval;
pub(crate) mod mcp;
pub(crate) mod tasks;

use anyhow::Context;
use forgehand::config::{Config, Secrets};
use forgehand::daemon::{setup, Daemon};
use forgehand::doctor;
use forgehand::task::TaskEnd;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tokio_util::sync::CancellationToken;

/// `forgehand run`: the daemon, until SIGTERM or SIGINT; a machine that
/// cannot run yet gets its first-run advice and exit code 2.
pub(crate) async fn run_daemon(config: Config, path: PathBuf) -> anyhow::Result<ExitCode> {
    let secrets = Secrets::from_env();
    let problems = setup::first_run_problems(&config, &secrets);
    if !problems.is_empty() {
        eprint!(
            "{}",
            setup::first_run_help(&problems, &path.display().to_string())
        );
        return Ok(ExitCode::from(2));
    }
    let assembly = setup::assemble(config, secrets, None).await?;
    let mut daemon = Daemon::new(assembly.env, assembly.forges).reload_on_hangup(path);
    let shutdown = cancelled_by_a_signal(true);
    daemon.run(shutdown).await?;
    Ok(ExitCode::SUCCESS)
}

/// `forgehand once URL`: one task in the foreground, its progress on
/// stderr; success when it delivered, changed nothing or had nothing to do.
pub(crate) async fn once(config: Config, url: &str) -> anyhow::Result<ExitCode> {
    let item = forgehand::forge::parse_item_url(url).with_context(|| {
        format!("{url:?} is not an issue or PR/MR address; give e.g. https://github.com/OWNER/REPO/issues/12")
    })?;
    let assembly = setup::assemble(config, Secrets::from_env(), Some(&[item.forge])).await?;
    let mut env = std::sync::Arc::into_inner(assembly.env).context("the task environment is shared")?;
    env.echo_progress = true;
    let forge = assembly.forges.into_iter().next().context("no forge connected")?;
    // Keyed under the watched spelling, as the daemon keys it.
    let mut item = item;
    if let Ok(watched) = forge.watched_repositories().await {
        if let Some(spelling) = forgehand::forge::watched_spelling(&watched, &item.repo) {
            item.repo = spelling.to_owned();
        }
    }
    let shutdown = cancelled_by_a_signal(false);
    let mut end = forgehand::task::run(&env, forge.clone(), item.clone(), shutdown.clone()).await;
    // `once` follows the task to its end: it waits (holding nothing) for
    // its checks or its paused label, then goes on from its journal.
    while matches!(end, TaskEnd::AwaitingChecks | TaskEnd::Paused) && !shutdown.is_cancelled() {
        match end {
            TaskEnd::Paused => {
                forgehand::task::wait_until_unpaused(&env, forge.as_ref(), &item, &shutdown).await
            }
            _ => forgehand::task::wait_for_checks(&env, forge.as_ref(), &item, &shutdown).await,
        }
        end = forgehand::task::run(&env, forge.clone(), item.clone(), shutdown.clone()).await;
    }
    if let TaskEnd::Deferred { reason } = &end {
        eprintln!("put off: {reason}; run the same command again to resume the task");
    } else {
        eprintln!("{end:?}");
    }
    Ok(match end {
        TaskEnd::Delivered { .. }
        | TaskEnd::NoChanges
        | TaskEnd::Skipped { .. }
        | TaskEnd::AwaitingApproval => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    })
}

/// `forgehand doctor`: every check's row on stdout, then the first-run
/// advice when the machine cannot run yet; failure when a check failed.
pub(crate) async fn doctor(config: &Config, path: &Path, probe_network: bool) -> anyhow::Result<ExitCode> {
    let secrets = Secrets::from_env();
    let options = doctor::DoctorOptions { probe_network };
    let checks = doctor::run_checks(config, &path.display().to_string(), &secrets, options).await;
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(doctor::render(&checks).as_bytes())?;
    // A machine that cannot run yet gets the same advice as `forgehand run`.
    let problems = setup::first_run_problems(config, &secrets);
    if !problems.is_empty() {
        writeln!(
            stdout,
            "\n{}",
            setup::first_run_help(&problems, &path.display().to_string())
        )?;
    }
    Ok(if doctor::all_passed(&checks) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// A token cancelled at SIGTERM or SIGINT (`log`: saying so).
fn cancelled_by_a_signal(log: bool) -> CancellationToken {
    let shutdown = CancellationToken::new();
    let trigger = shutdown.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        if log {
            tracing::info!("shutdown requested");
        }
        trigger.cancel();
    });
    shutdown
}

pub(crate) async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
