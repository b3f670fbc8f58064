//! `git:`: the mirror of each repository the host keeps, and how much
//! history a task fetches and hands to its sandbox.

use super::units::HumanDuration;
use super::ConfigError;
use serde::Deserialize;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub struct GitConfig {
    /// Commits of each branch fetched into the mirror, and handed to the
    /// sandbox, counted from its tip; `None`: the whole history.
    pub history_depth: Option<u32>,
    /// A mirror no task used for this long is removed (it is made again,
    /// shallow, when a task needs it).
    pub mirror_retention: Duration,
    /// `git.lfs`: Git LFS files on the host.
    pub lfs: super::lfs::LfsConfig,
    /// `git.submodules`: which submodules the work tree gets.
    pub submodules: super::submodules::SubmodulesConfig,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawGit {
    pub history_depth: u32,
    pub mirror_retention: HumanDuration,
    pub lfs: super::lfs::RawLfs,
    pub submodules: super::submodules::RawSubmodules,
}

impl Default for RawGit {
    fn default() -> Self {
        RawGit {
            history_depth: 50,
            mirror_retention: HumanDuration(Duration::from_secs(14 * 24 * 3600)),
            lfs: super::lfs::RawLfs::default(),
            submodules: Default::default(),
        }
    }
}

pub(super) fn resolve_git(raw: RawGit) -> Result<GitConfig, ConfigError> {
    if raw.mirror_retention.0 < Duration::from_secs(3600) {
        return Err(ConfigError::invalid(
            "git.mirror_retention",
            format!(
                "{} is too short: a mirror must outlive a task; write at least \"1h\", e.g. \"14d\"",
                humantime::format_duration(raw.mirror_retention.0)
            ),
        ));
    }
    Ok(GitConfig {
        history_depth: (raw.history_depth > 0).then_some(raw.history_depth),
        mirror_retention: raw.mirror_retention.0,
        lfs: super::lfs::resolve_lfs(raw.lfs)?,
        submodules: super::submodules::resolve_submodules(raw.submodules)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_depth_is_the_whole_history_and_retention_has_a_floor() {
        let git = resolve_git(RawGit::default()).unwrap();
        assert_eq!(git.history_depth, Some(50));
        let whole = resolve_git(RawGit {
            history_depth: 0,
            ..RawGit::default()
        })
        .unwrap();
        assert_eq!(whole.history_depth, None);
        let err = resolve_git(RawGit {
            mirror_retention: HumanDuration(Duration::from_secs(60)),
            ..RawGit::default()
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("git.mirror_retention"), "{err}");
    }
}
