//! The plan a task follows, whoever made it (the planners' debate or a
//! writer's approval): below the phases, since the run carries an approved
//! one from the start.

/// The agreed plan, for the agent's prompt and the progress checklist.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(in crate::task) struct TaskPlan {
    pub text: String,
    pub checklist: Vec<String>,
    /// How the plan was made, as the agent is told.
    pub made: String,
}
