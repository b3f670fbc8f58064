//! Several daemon replicas working one set of forges: which replica works
//! which task is decided by Kubernetes Leases, one per task; which replica
//! opens a scheduled automation's issue, by one Lease per automation and
//! repository ([`slots`]).

pub mod fenced;
pub mod kube_leases;
pub mod lease;
pub mod slots;

use crate::forge::ItemRef;
use sha2::{Digest, Sha256};

/// The longest Lease name Kubernetes takes (a DNS subdomain).
const MAX_NAME: usize = 253;

/// The Lease of `item` among replicas of `group`: `<group>-<item slug>`,
/// with the slug's end replaced by a hash when the name would be too long.
pub fn lease_name(group: &str, item: &ItemRef) -> String {
    let name = format!("{group}-{}", item.slug());
    if name.len() <= MAX_NAME {
        return name;
    }
    let digest = Sha256::digest(item.key().as_bytes());
    let hash: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let mut kept = name[..MAX_NAME - hash.len() - 1].trim_end_matches('-').to_owned();
    kept.push('-');
    kept.push_str(&hash);
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forge::{ForgeKind, ItemKind};

    #[test]
    fn lease_names_are_dns_subdomains_and_distinct() {
        let item = |repo: &str, number| ItemRef {
            forge: ForgeKind::GitLab,
            repo: repo.into(),
            kind: ItemKind::Change,
            number,
        };
        assert_eq!(
            lease_name("forgehand", &item("Group/Sub/App", 7)),
            "forgehand-gitlab-group-sub-app-mr-7"
        );
        let long = "g/".repeat(200);
        let (a, b) = (
            lease_name("fh", &item(&long, 1)),
            lease_name("fh", &item(&long, 2)),
        );
        assert!(a.len() <= MAX_NAME && b.len() <= MAX_NAME);
        assert_ne!(a, b);
        assert!(a
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-'));
    }
}
