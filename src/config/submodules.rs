//! `git.submodules`: which submodules a task's work tree gets, fetched on
//! the host. The forge's own host is always allowed (with the forge's
//! credential); other hosts only when named here, and then anonymously.

use super::host_pattern::{host_patterns, HostPattern};
use super::units::ByteSize;
use super::ConfigError;
use serde::Deserialize;

/// Most levels of submodules an operator may ask for.
const MAX_DEPTH: u32 = 10;

#[derive(Debug, Clone, PartialEq)]
pub struct SubmodulesConfig {
    /// Whether submodules are fetched and checked out at all.
    pub enabled: bool,
    /// Levels fetched: 1 is the superproject's submodules, 2 theirs too.
    pub depth: u32,
    /// Hosts other than the forge's from which submodules are fetched,
    /// without credentials.
    pub allowed_hosts: Vec<HostPattern>,
    /// Bytes the submodules' fetches of one task may receive, and bytes
    /// of their files written into the work tree (each, all together).
    pub max_bytes: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawSubmodules {
    pub enabled: bool,
    pub depth: u32,
    pub allowed_hosts: Vec<String>,
    pub max_bytes: ByteSize,
}

impl Default for RawSubmodules {
    fn default() -> Self {
        RawSubmodules {
            enabled: true,
            depth: 2,
            allowed_hosts: Vec::new(),
            max_bytes: ByteSize(1 << 30),
        }
    }
}

pub(super) fn resolve_submodules(raw: RawSubmodules) -> Result<SubmodulesConfig, ConfigError> {
    if raw.depth > MAX_DEPTH {
        return Err(ConfigError::invalid(
            "git.submodules.depth",
            format!(
                "{} levels is more than the {MAX_DEPTH} allowed; write a smaller number (2: submodules and theirs), or set enabled: false",
                raw.depth
            ),
        ));
    }
    if raw.max_bytes.bytes() == 0 {
        return Err(ConfigError::invalid(
            "git.submodules.max_bytes",
            "0 bytes would fetch nothing; write a size such as \"1g\", or set enabled: false".to_owned(),
        ));
    }
    Ok(SubmodulesConfig {
        enabled: raw.enabled && raw.depth > 0,
        depth: raw.depth,
        allowed_hosts: host_patterns("git.submodules.allowed_hosts", &raw.allowed_hosts)?,
        max_bytes: raw.max_bytes.bytes(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_on_two_levels_deep_and_the_forge_only() {
        let config = resolve_submodules(RawSubmodules::default()).unwrap();
        assert!(config.enabled);
        assert_eq!(config.depth, 2);
        assert!(config.allowed_hosts.is_empty());
        assert_eq!(config.max_bytes, 1 << 30);
    }

    #[test]
    fn bad_hosts_and_depths_name_the_key() {
        let err = resolve_submodules(RawSubmodules {
            allowed_hosts: vec!["https://other.example/x.git".into()],
            ..RawSubmodules::default()
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("git.submodules.allowed_hosts"), "{err}");
        let err = resolve_submodules(RawSubmodules {
            depth: 99,
            ..RawSubmodules::default()
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("git.submodules.depth"), "{err}");
        let off = resolve_submodules(RawSubmodules {
            depth: 0,
            ..RawSubmodules::default()
        })
        .unwrap();
        assert!(!off.enabled);
    }
}
