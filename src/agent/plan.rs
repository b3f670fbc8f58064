//! `update_plan`: the model keeps the task's plan checklist current, as
//! Codex's tool of the same name does. It sends the whole list each time,
//! each step with its status; forgehand shows it on the progress comment.

use super::tools::LocalTool;
use crate::llm::ToolSpec;
use crate::mcp::ToolOutput;
use async_trait::async_trait;
use serde_json::{json, Map, Value};
use std::sync::{Arc, Mutex};

pub const UPDATE_PLAN: &str = "update_plan";
/// Steps a plan may hold; more is refused with a message.
const MAX_STEPS: usize = 30;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum StepStatus {
    Pending,
    InProgress,
    Completed,
}

impl StepStatus {
    fn parse(text: &str) -> Option<StepStatus> {
        match text {
            "pending" => Some(StepStatus::Pending),
            "in_progress" => Some(StepStatus::InProgress),
            "completed" => Some(StepStatus::Completed),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PlanStep {
    pub step: String,
    pub status: StepStatus,
}

/// Called with the new list after every accepted update.
pub type OnUpdate = Arc<dyn Fn(&[PlanStep]) + Send + Sync>;

pub struct PlanTracker {
    steps: Mutex<Vec<PlanStep>>,
    on_update: Option<OnUpdate>,
}

impl PlanTracker {
    /// Starts with `steps` pending.
    pub fn new(steps: &[String], on_update: Option<OnUpdate>) -> PlanTracker {
        PlanTracker {
            steps: Mutex::new(
                steps
                    .iter()
                    .map(|s| PlanStep {
                        step: s.clone(),
                        status: StepStatus::Pending,
                    })
                    .collect(),
            ),
            on_update,
        }
    }

    pub fn steps(&self) -> Vec<PlanStep> {
        self.steps.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Checks and applies an update; the error tells the model what to fix.
    pub fn update(&self, arguments: &Map<String, Value>) -> Result<String, String> {
        let Some(Value::Array(items)) = arguments.get("plan") else {
            return Err("`plan` must be an array of {\"step\": string, \"status\": \"pending\" | \"in_progress\" | \"completed\"}.".into());
        };
        if items.is_empty() || items.len() > MAX_STEPS {
            return Err(format!(
                "`plan` must hold 1 to {MAX_STEPS} steps, not {}.",
                items.len()
            ));
        }
        let mut steps = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let step = item
                .get("step")
                .and_then(Value::as_str)
                .map(str::trim)
                .unwrap_or_default();
            if step.is_empty() {
                return Err(format!("plan[{i}].step must be a non-empty string."));
            }
            let status = item.get("status").and_then(Value::as_str).unwrap_or_default();
            let Some(status) = StepStatus::parse(status) else {
                return Err(format!(
                    "plan[{i}].status is {status:?}; use \"pending\", \"in_progress\" or \"completed\"."
                ));
            };
            steps.push(PlanStep {
                step: step.to_owned(),
                status,
            });
        }
        if steps
            .iter()
            .filter(|s| s.status == StepStatus::InProgress)
            .count()
            > 1
        {
            return Err("At most one step may be in_progress at a time.".into());
        }
        let done = steps.iter().filter(|s| s.status == StepStatus::Completed).count();
        let total = steps.len();
        *self.steps.lock().unwrap_or_else(|p| p.into_inner()) = steps.clone();
        if let Some(on_update) = &self.on_update {
            on_update(&steps);
        }
        Ok(format!("Plan updated: {done} of {total} steps completed."))
    }
}

#[async_trait]
impl LocalTool for PlanTracker {
    fn spec(&self) -> ToolSpec {
        let parameters = json!({
            "type": "object",
            "properties": {
                "explanation": {"type": "string", "description": "Optional: why the plan changed."},
                "plan": {
                    "type": "array",
                    "description": "The whole plan, every step with its status.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "step": {"type": "string"},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}
                        },
                        "required": ["step", "status"]
                    }
                }
            },
            "required": ["plan"]
        });
        ToolSpec {
            name: UPDATE_PLAN.to_owned(),
            description: "Update the task's plan checklist: send the whole list with each step's status (at most one in_progress). Call it when you start a step and when you finish one.".to_owned(),
            parameters: match parameters {
                Value::Object(map) => map,
                _ => Map::new(),
            },
        }
    }

    async fn call(&self, arguments: Map<String, Value>) -> ToolOutput {
        match self.update(&arguments) {
            Ok(text) => ToolOutput {
                text,
                is_error: false,
            },
            Err(text) => ToolOutput { text, is_error: true },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn updates_are_checked_and_reported() {
        let seen = Arc::new(Mutex::new(0usize));
        let counter = seen.clone();
        let tracker = PlanTracker::new(
            &["a".into(), "b".into()],
            Some(Arc::new(move |steps: &[PlanStep]| {
                *counter.lock().unwrap() = steps.len()
            })),
        );
        let args = |v: Value| v.as_object().unwrap().clone();
        let ok = tracker
            .update(&args(json!({"plan": [{"step": "a", "status": "completed"}, {"step": "b", "status": "in_progress"}, {"step": "c", "status": "pending"}]})))
            .unwrap();
        assert_eq!(ok, "Plan updated: 1 of 3 steps completed.");
        assert_eq!(*seen.lock().unwrap(), 3);
        assert_eq!(tracker.steps()[0].status, StepStatus::Completed);
        let bad = tracker
            .update(&args(json!({"plan": [{"step": "a", "status": "done"}]})))
            .unwrap_err();
        assert!(bad.contains("\"done\""), "{bad}");
        let two = tracker
            .update(&args(json!({"plan": [{"step": "a", "status": "in_progress"}, {"step": "b", "status": "in_progress"}]})))
            .unwrap_err();
        assert!(two.contains("At most one"), "{two}");
        assert!(tracker.update(&args(json!({"plan": "x"}))).is_err());
    }
}
