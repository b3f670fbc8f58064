//! One model call of a planning, and the limits around it.
//!
//! The judgement has its own share of the time and the token budget: the
//! debate wraps up early enough to leave it, so a debate that runs out of
//! time still goes to judgement. A phase starts only while its calls can
//! get a useful share of time (a quarter of `planning.call_timeout`), so
//! late calls are not all cut to the seconds left. A broken connection is
//! tried again; a named model that still cannot answer (down, or the request
//! too large for its window: our own count, or the provider's typed
//! refusal) hands the call to the router, which picks a model that fits and
//! falls back along `llm.models`.

use super::{prompts, CallRecord, DebateEvent, DebateSettings, PhaseUsage, Run};
use crate::llm::{ChatResponse, LlmError};
use std::time::Duration;
use tokio::time::Instant;

/// What a call is for: how it is asked and which share of time it may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ask {
    /// Plans, critiques, revisions: the debate's share of the time.
    Debate,
    /// The consensus check: the debate's share, in JSON mode.
    Consensus,
    /// The judgement: its own reserved share.
    Judge,
}

/// What is kept for the judgement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Reserve {
    pub time: Duration,
    pub tokens: u64,
}

impl Reserve {
    /// A quarter of the time limit (at most one call timeout), and the
    /// tokens of one judgement: the context, every plan and its answer.
    pub fn for_judge(settings: &DebateSettings, context_tokens: u64, debaters: usize) -> Reserve {
        Reserve {
            time: settings.call_timeout.min(settings.time_limit / 4),
            tokens: context_tokens + (debaters as u64 + 1) * u64::from(settings.max_output_tokens),
        }
    }
}

/// Waits before sending a call again after a broken connection.
const NETWORK_RETRIES: [Duration; 2] = [Duration::from_millis(500), Duration::from_secs(2)];

impl Run<'_> {
    /// The time the debate itself may use (the rest is the judge's).
    fn debate_time(&self) -> Duration {
        self.planner.settings.time_limit.saturating_sub(self.reserve.time)
    }

    /// The least time a phase's calls should have.
    fn shortest_phase(&self) -> Duration {
        (self.planner.settings.call_timeout / 4)
            .max(Duration::from_secs(1))
            .min(self.debate_time())
    }

    /// Why the debate must wrap up now (and go to judgement), if it must.
    pub(super) fn limit_reached(&self) -> Option<String> {
        let settings = self.planner.settings;
        let left = self.debate_time().saturating_sub(self.started.elapsed());
        if left < self.shortest_phase() || left.is_zero() {
            return Some(if self.reserve.time.is_zero() {
                format!(
                    "the planning ran out of time (planning.time_limit is {} s)",
                    settings.time_limit.as_secs()
                )
            } else {
                format!(
                    "the debate ran out of its time ({} s of planning.time_limit's {} s; the rest is kept for the judge)",
                    self.debate_time().as_secs(),
                    settings.time_limit.as_secs()
                )
            });
        }
        let used = self.tally().usage.total().total();
        (used + self.reserve.tokens >= settings.token_budget).then(|| {
            format!(
                "the token budget is spent: {used} of planning.token_budget's {} tokens used{}",
                settings.token_budget,
                if self.reserve.tokens > 0 {
                    format!(", {} kept for the judge", self.reserve.tokens)
                } else {
                    String::new()
                }
            )
        })
    }

    /// How long a call started now may take.
    fn call_time(&self, ask: Ask) -> Duration {
        let settings = self.planner.settings;
        let elapsed = self.started.elapsed();
        let left = match ask {
            Ask::Judge => settings.time_limit.saturating_sub(elapsed).max(self.reserve.time),
            Ask::Debate | Ask::Consensus => self.debate_time().saturating_sub(elapsed),
        };
        settings.call_timeout.min(left.max(Duration::from_secs(1)))
    }

    /// One model call, replayed from its checkpoint when it has one.
    /// `model` `None`: the router chooses by size.
    pub(super) async fn call(
        &self,
        step: &str,
        phase: &str,
        model: Option<&str>,
        part: &str,
        ask: Ask,
    ) -> Result<String, String> {
        let key = format!("{}/{step}", self.fingerprint);
        let planner = self.planner;
        if let Some(record) = planner.checkpoints.load(&key) {
            self.account(step, phase, &record, true);
            return Ok(record.text);
        }
        let mut request = prompts::call(
            self.context,
            self.request,
            part,
            planner.settings.max_output_tokens,
        );
        request.json_output = ask == Ask::Consensus;
        let time = self.call_time(ask);
        let deadline = Instant::now() + time;
        let who = model.unwrap_or("the chosen model");
        let response = match self.send(model, &request, deadline).await {
            Ok(response) => response,
            Err(Sent::Late) => {
                // Say which limit it was: the call's own, or the debate's time running out.
                return Err(if time < planner.settings.call_timeout {
                    format!(
                        "the debate ran out of time: {who} did not answer in the {} s left of planning.time_limit",
                        time.as_secs_f64().round()
                    )
                } else {
                    format!(
                        "{who} did not answer within planning.call_timeout ({} s)",
                        time.as_secs_f64().round()
                    )
                });
            }
            Err(Sent::Failed(e)) => return Err(e.to_string()),
        };
        if response.text.trim().is_empty() {
            return Err(format!("{} answered with no text", response.model));
        }
        let record = CallRecord {
            model: response.model.clone(),
            text: response.text,
            usage: response.usage,
        };
        planner.checkpoints.save(&key, &record);
        self.account(step, phase, &record, false);
        Ok(record.text)
    }

    /// Sends a call by `deadline`: again after a broken connection, then to
    /// the router's choice when the named model cannot take it.
    async fn send(
        &self,
        model: Option<&str>,
        request: &crate::llm::ChatRequest,
        deadline: Instant,
    ) -> Result<ChatResponse, Sent> {
        let chat = self.planner.model;
        let once = |name: Option<&str>| {
            let name = name.map(str::to_owned);
            async move {
                let sent = match &name {
                    Some(name) => tokio::time::timeout_at(deadline, chat.chat_on(name, request)).await,
                    None => tokio::time::timeout_at(deadline, chat.chat(request)).await,
                };
                match sent {
                    Err(_) => Err(Sent::Late),
                    Ok(answer) => answer.map_err(Sent::Failed),
                }
            }
        };
        let mut answer = once(model).await;
        for wait in NETWORK_RETRIES {
            let Err(Sent::Failed(LlmError::Network { .. })) = &answer else {
                break;
            };
            if Instant::now() + wait >= deadline {
                break;
            }
            tokio::time::sleep(wait).await;
            answer = once(model).await;
        }
        match (model, answer) {
            (Some(name), Err(Sent::Failed(e))) if e.falls_back() || e.is_too_large() => {
                let answer = once(None).await;
                if let Ok(response) = &answer {
                    self.note(format!(
                        "{name} could not answer ({e}); {} answered in its place",
                        response.model
                    ));
                }
                answer
            }
            (_, answer) => answer,
        }
    }

    /// Counts a finished call (made now, or `replayed` from its checkpoint)
    /// in its phase and reports it.
    fn account(&self, step: &str, phase: &str, record: &CallRecord, replayed: bool) {
        let mut tally = self.tally();
        tally.usage.add(&record.model, record.usage);
        let cost = tally.usage.cost_of(&record.model, record.usage).unwrap_or(0.0);
        match tally.phases.iter_mut().find(|p| p.phase == phase) {
            Some(p) => {
                p.usage.add(record.usage);
                p.cost += cost;
            }
            None => tally.phases.push(PhaseUsage {
                phase: phase.to_owned(),
                usage: record.usage,
                cost,
            }),
        }
        tally.done += 1;
        if replayed {
            tally.replayed += 1;
        } else {
            tally.calls += 1;
        }
        drop(tally);
        self.emit(DebateEvent::Call {
            step: step.to_owned(),
            model: record.model.clone(),
            usage: record.usage,
            replayed,
        });
    }
}

/// Why a call brought no answer.
enum Sent {
    /// Its time ran out.
    Late,
    Failed(LlmError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_refusal_for_size_hands_the_call_on() {
        let refused = |refusal| LlmError::Refused {
            provider: "anthropic".into(),
            refusal,
            message: "invalid_request_error: prompt is too long: 210000 tokens > 200000 maximum".into(),
        };
        assert!(refused(crate::llm::Refusal::ContextTooLong).is_too_large());
        assert!(LlmError::TooLarge {
            tokens: 1,
            limits: String::new()
        }
        .is_too_large());
        assert!(!refused(crate::llm::Refusal::ContentPolicy).is_too_large());
        // A refusal in words the provider did not type is not one for size.
        let worded = LlmError::Rejected {
            provider: "openai".into(),
            status: 400,
            message: "This model's maximum context length is 200000 tokens".into(),
        };
        assert!(!worded.is_too_large());
    }

    #[test]
    fn the_judge_keeps_a_quarter_of_the_time_and_one_judgements_tokens() {
        let settings = DebateSettings::for_tests(16_000);
        let reserve = Reserve::for_judge(&settings, 120_000, 3);
        assert_eq!(reserve.time, Duration::from_secs(5 * 60));
        assert_eq!(reserve.tokens, 120_000 + 4 * 16_000);
        let short = DebateSettings {
            time_limit: Duration::from_secs(60 * 60),
            call_timeout: Duration::from_secs(5 * 60),
            ..settings
        };
        assert_eq!(Reserve::for_judge(&short, 1, 2).time, Duration::from_secs(5 * 60));
    }
}
