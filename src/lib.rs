//! forgehand: a daemon that turns labelled GitHub and GitLab issues into
//! pushed branches and draft PRs/MRs, working inside hardened sandboxes.
//!
//! What runs inside a sandbox (the text editor, the supervisor, the
//! snapshot packer) is the `forgehand-editor` crate.

pub mod agent;
pub mod automations;
pub mod budget;
pub mod config;
pub mod context_store;
pub mod daemon;
pub mod doctor;
pub mod eval;
pub mod forge;
pub mod git;
pub mod html;
pub mod ideas;
pub mod images;
pub mod journal;
pub mod kill_point;
pub mod llm;
pub mod logging;
pub mod mcp;
pub mod mcp_servers;
pub mod memory;
pub mod metrics;
pub mod ownership;
pub mod planning;
pub mod prompts;
pub mod redact;
pub mod replicas;
pub mod repo_settings;
pub mod sandbox;
pub mod sanitize;
pub mod secrets;
pub mod snapshots;
pub mod task;
pub mod thread_images;
pub mod transcript;
pub mod webhooks;
