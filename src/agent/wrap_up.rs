//! A run that reached a spending cap ends with one last turn: the model is
//! told to stop and say where it stands, with no tools and a small output
//! room, so that what it committed is delivered with its own summary. The
//! turn is only sent when it still fits under the caps.

use super::{Agent, AgentOutcome, Run, StopReason};
use crate::llm::{ChatRequest, Message};

/// Output room of the last turn: a summary, not more work.
/// Enough for a short summary, and below the room an ordinary turn needs
/// ([`crate::budget::MIN_OUTPUT_TOKENS`]), so the last turn still fits
/// where the next full one did not.
const WRAP_UP_OUTPUT_TOKENS: u32 = 512;

impl Agent {
    /// Ends `run`, stopped by the budget (`reason`), with the model's
    /// summary when the last turn fits.
    pub(super) async fn wrap_up(&self, mut run: Run, system: &str, reason: String) -> AgentOutcome {
        let note = format!(
            "[forgehand: the money left under this task's cap pays for no further full turn ({reason}). Stop here: \
call no tools. Answer with a short summary of what you changed (it is committed and delivered as it is) and what \
is left to do.]"
        );
        let mut messages = run.messages.clone();
        match messages.last_mut() {
            // Beside the results, so the turns keep alternating.
            Some(Message::ToolResults(results)) if !results.is_empty() => {
                if let Some(last) = results.last_mut() {
                    last.content.push_str(&format!("\n\n{note}"));
                }
            }
            _ => messages.push(Message::User(note)),
        }
        let request = ChatRequest {
            model: String::new(),
            system: system.to_owned(),
            messages,
            tools: Vec::new(),
            max_output_tokens: WRAP_UP_OUTPUT_TOKENS.min(self.limits.max_output_tokens),
            temperature: self.limits.temperature,
            reasoning_effort: None,
            cache_system: true,
            json_output: false,
        };
        let stop = StopReason::Budget(reason);
        let asked = std::time::Instant::now();
        let answered = self.model.chat(&request).await;
        if let Ok(response) = &answered {
            self.record_turn(run.steps + 1, response, asked.elapsed());
        }
        match answered {
            Ok(response) if !response.text.trim().is_empty() => {
                run.usage.add(&response.model, response.usage);
                run.messages.push(response.to_message());
                run.finish(Some(response.text), stop)
            }
            Ok(response) => {
                run.usage.add(&response.model, response.usage);
                run.finish(None, stop)
            }
            Err(e) => {
                tracing::info!("no last turn to wrap up: {e}");
                run.finish(None, stop)
            }
        }
    }
}
