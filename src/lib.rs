//! forgehand: a daemon that turns labelled GitHub and GitLab issues into
//! pushed branches and draft PRs/MRs, working inside hardened sandboxes.

pub mod config;
pub mod doctor;
pub mod images;
pub mod logging;
pub mod sandbox;
