//! How the task names its item in its own text (titles, links).

use crate::forge::{ForgeKind, ItemKind, ItemRef};

/// `#12` for GitHub and GitLab issues (both link it); `!12` for a GitLab MR.
pub(super) fn issue_ref(item: &ItemRef) -> String {
    match (item.forge, item.kind) {
        (ForgeKind::GitLab, ItemKind::Change) => format!("!{}", item.number),
        _ => format!("#{}", item.number),
    }
}
