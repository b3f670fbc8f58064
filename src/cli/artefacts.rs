//! What forgehand keeps on this machine: the sandbox images
//! (`forgehand images`), the setup snapshots (`forgehand snapshots`) and
//! the repositories' mirrors (`forgehand mirrors`).

use anyhow::Context;
use forgehand::config::Config;
use forgehand::images;
use forgehand::sandbox::docker::connect;
use forgehand::sandbox::helper::EditorBinary;
use forgehand::snapshots::{human_bytes, SnapshotStore};
use std::io::Write;

use std::process::ExitCode;

/// `forgehand images list`: each image with its tag, then the snapshots.
pub(crate) fn list_images(config: &Config) -> anyhow::Result<ExitCode> {
    let mut stdout = std::io::stdout().lock();
    for name in images::available_images(&config.images)
        .with_context(|| format!("reading images.dir {:?}", config.images.dir))?
    {
        writeln!(stdout, "{name}\t{}", images::image_tag(&config.images, &name))?;
    }
    let store = SnapshotStore::new(&config.sandbox.snapshots);
    for snapshot in store.list()? {
        writeln!(stdout, "snapshot\t{}", snapshot.describe())?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `forgehand images build [NAMES] [--no-cache]`.
pub(crate) async fn build_images(
    config: &Config,
    names: &[String],
    no_cache: bool,
) -> anyhow::Result<ExitCode> {
    let editor = EditorBinary::locate(config.text_editor_mcp.editor_binary.as_deref())?;
    let docker = connect(&config.docker).await?;
    let mut progress = |name: &str, line: &str| eprintln!("[{name}] {line}");
    let cache = if no_cache {
        images::BuildCache::Ignore
    } else {
        images::BuildCache::Use
    };
    let tags = images::build_images(&docker, &config.images, &editor, names, cache, &mut progress).await?;
    tracing::info!(images = %tags.join(", "), "images built");
    Ok(ExitCode::SUCCESS)
}

/// `forgehand snapshots list`: one line per snapshot, then the total.
pub(crate) fn list_snapshots(config: &Config) -> anyhow::Result<ExitCode> {
    let store = SnapshotStore::new(&config.sandbox.snapshots);
    let all = store.list()?;
    let mut stdout = std::io::stdout().lock();
    for snapshot in &all {
        writeln!(stdout, "{}", snapshot.describe())?;
    }
    let total: u64 = all.iter().map(|s| s.bytes).sum();
    writeln!(
        stdout,
        "{} snapshot(s), {} of {} (sandbox.snapshots.max_bytes) in {}",
        all.len(),
        human_bytes(total),
        human_bytes(store.max_bytes()),
        store.dir().display()
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `forgehand snapshots remove [KEYS] [--repository R] [--all]`.
pub(crate) fn remove_snapshots(
    config: &Config,
    keys: &[String],
    repository: Option<&str>,
    all: bool,
) -> anyhow::Result<ExitCode> {
    if keys.is_empty() && repository.is_none() && !all {
        anyhow::bail!("name the snapshots to remove: keys (or their first characters), --repository OWNER/NAME, or --all");
    }
    let store = SnapshotStore::new(&config.sandbox.snapshots);
    let removed = store.remove_where(|s| {
        all || repository == Some(s.repository.as_str())
            || keys
                .iter()
                .any(|k| !k.is_empty() && s.key.starts_with(k.as_str()))
    })?;
    let mut stdout = std::io::stdout().lock();
    for snapshot in &removed {
        writeln!(stdout, "removed {}", snapshot.describe())?;
    }
    if removed.is_empty() {
        writeln!(
            stdout,
            "no snapshot matched; `forgehand snapshots list` shows them"
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `forgehand mirrors list`: one line per mirror, then the total.
pub(crate) fn list_mirrors(config: &Config) -> anyhow::Result<ExitCode> {
    let mirrors = forgehand::git::mirror::Mirrors::for_config(config);
    let all = mirrors
        .list()
        .with_context(|| format!("reading {}", mirrors.root().display()))?;
    let mut stdout = std::io::stdout().lock();
    for mirror in &all {
        let used = mirror.last_used.map_or_else(
            || "never used".to_owned(),
            |t| format!("used {}", humantime::format_rfc3339_seconds(t)),
        );
        writeln!(
            stdout,
            "{}\t{}\t{}\t{used}\t{}",
            mirror.url,
            human_bytes(mirror.bytes),
            if mirror.shallow {
                "shallow"
            } else {
                "whole history"
            },
            mirror.path.display()
        )?;
    }
    writeln!(
        stdout,
        "{} mirror(s), {} in {}",
        all.len(),
        human_bytes(all.iter().map(|m| m.bytes).sum()),
        mirrors.root().display()
    )?;
    Ok(ExitCode::SUCCESS)
}
