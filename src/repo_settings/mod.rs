//! A repository's own environment: its `.forgehand.yaml` merged with the
//! operator's `repositories:` settings ([`settings`]), and the instructions
//! it gives agents (`AGENTS.md` and kin, [`instructions`]). Both are read
//! from the base branch, never from a branch the task or an outsider wrote.
//! [`snapshot_key`] decides which setup snapshot a task may start from.

pub mod instructions;
pub mod settings;
pub mod snapshot_key;

pub use instructions::{InstructionFile, Instructions};
pub use settings::{RepoSettings, SettingsError, SETTINGS_FILE};
