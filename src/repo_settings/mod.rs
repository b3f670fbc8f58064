//! A repository's own environment: its `.forgehand.yaml` merged with the
//! operator's `repositories:` settings ([`settings`]), and the instructions
//! it gives agents (`AGENTS.md` and kin, [`instructions`]). Both are read
//! from the base branch, never from a branch the task or an outsider wrote.

pub mod instructions;
pub mod settings;
pub mod setup;

pub use instructions::{InstructionFile, Instructions};
pub use settings::{RepoSettings, SettingsError, SETTINGS_FILE};
