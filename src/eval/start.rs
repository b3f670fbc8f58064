//! What `forgehand eval` builds before the instances run: the shared task
//! environment, with a journal and sandbox owner of its own (in the output
//! folder), so an evaluation never touches a running daemon's state.

use super::{EvalError, Options};
use crate::config::{Config, Secrets};
use crate::daemon::setup::{self, Kept};
use crate::task::TaskEnv;
use std::sync::Arc;

/// The task environment for an evaluation writing to `options.out`.
pub async fn environment(
    mut config: Config,
    secrets: Secrets,
    options: &Options,
) -> Result<Arc<TaskEnv>, EvalError> {
    if let Some(problem) = setup::model_key_problem(&config, &secrets) {
        return Err(EvalError::Setup(problem));
    }
    config.daemon.state_dir = super::state_dir(&options.out);
    // Its own sandboxes: a daemon of the same instance may be running.
    if !config.daemon.instance_id.is_empty() {
        config.daemon.instance_id = format!("{}-eval", config.daemon.instance_id);
    }
    let kept = Kept::acquire(&config.daemon.state_dir).map_err(|e| EvalError::Setup(e.to_string()))?;
    setup::task_env(config, secrets, kept)
        .await
        .map_err(|e| EvalError::Setup(e.to_string()))
}

/// The name predictions carry when none is given: the preferred model's.
pub fn default_model_name(config: &Config) -> String {
    config
        .llm
        .models
        .iter()
        .find(|m| !m.light)
        .or(config.llm.models.first())
        .map_or_else(|| "forgehand".to_owned(), |m| format!("forgehand-{}", m.model))
}
