//! `git.lfs:`: Git LFS files fetched and uploaded on the host with the
//! forge credential, to the hosts it may go to.

use super::host_pattern::{host_patterns, HostPattern};
use super::units::ByteSize;
use super::ConfigError;
use serde::Deserialize;

#[derive(Debug, Clone, PartialEq)]
pub struct LfsConfig {
    /// Whether LFS files are fetched for the sandbox and uploaded on delivery.
    pub enabled: bool,
    /// Most bytes of LFS content one checkout fetches; files beyond it stay
    /// pointers and the agent is told which.
    pub max_total_bytes: u64,
    /// Hosts besides the forge's own an LFS endpoint (and the object
    /// transfers it names) may be on; the forge credential goes to them too.
    pub allowed_hosts: Vec<HostPattern>,
}

impl Default for LfsConfig {
    fn default() -> LfsConfig {
        LfsConfig {
            enabled: true,
            max_total_bytes: 500 << 20,
            allowed_hosts: Vec::new(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawLfs {
    pub enabled: bool,
    pub max_total_bytes: ByteSize,
    pub allowed_hosts: Vec<String>,
}

impl Default for RawLfs {
    fn default() -> Self {
        let config = LfsConfig::default();
        RawLfs {
            enabled: config.enabled,
            max_total_bytes: ByteSize(config.max_total_bytes),
            allowed_hosts: Vec::new(),
        }
    }
}

pub(super) fn resolve_lfs(raw: RawLfs) -> Result<LfsConfig, ConfigError> {
    Ok(LfsConfig {
        enabled: raw.enabled,
        max_total_bytes: raw.max_total_bytes.bytes(),
        allowed_hosts: host_patterns("git.lfs.allowed_hosts", &raw.allowed_hosts)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_bad_hosts_are_named() {
        let config = resolve_lfs(RawLfs::default()).unwrap();
        assert_eq!(config, LfsConfig::default());
        let err = resolve_lfs(RawLfs {
            allowed_hosts: vec!["https://lfs.example.org/x".into()],
            ..RawLfs::default()
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("git.lfs.allowed_hosts"), "{err}");
    }
}
