//! forgehand: a daemon that turns labelled GitHub and GitLab issues into
//! pushed branches and draft PRs/MRs, working inside hardened sandboxes.
//!
//! Without the default `daemon` feature only [`editor`] is built: that is
//! what the static `forgehand-editor` executable put in every sandbox needs.

pub mod editor;
pub mod folder_tar;
pub mod supervisor;

#[cfg(feature = "daemon")]
pub mod agent;
#[cfg(feature = "daemon")]
pub mod config;
#[cfg(feature = "daemon")]
pub mod daemon;
#[cfg(feature = "daemon")]
pub mod doctor;
#[cfg(feature = "daemon")]
pub mod forge;
#[cfg(feature = "daemon")]
pub mod git;
#[cfg(feature = "daemon")]
pub mod images;
#[cfg(feature = "daemon")]
pub mod journal;
#[cfg(feature = "daemon")]
pub mod llm;
#[cfg(feature = "daemon")]
pub mod logging;
#[cfg(feature = "daemon")]
pub mod mcp;
#[cfg(feature = "daemon")]
pub mod metrics;
#[cfg(feature = "daemon")]
pub mod ownership;
#[cfg(feature = "daemon")]
pub mod planning;
#[cfg(feature = "daemon")]
pub mod prompts;
#[cfg(feature = "daemon")]
pub mod replicas;
#[cfg(feature = "daemon")]
pub mod repo_settings;
#[cfg(feature = "daemon")]
pub mod sandbox;
#[cfg(feature = "daemon")]
pub mod task;
