//! The model calls a run makes outside the agent's loop (reading the
//! thread, planning), written into its transcript as they are answered.

use super::{entry, Entry, Transcript};
use crate::llm::observed::CallObserver;
use crate::llm::usage::{Price, UsageReport};
use crate::llm::{ChatResponse, LlmError};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Writes each call an observed model forwards into a transcript.
pub struct Recorder {
    transcript: Arc<Transcript>,
    /// What the calls are for, as the transcript says it ("planning").
    purpose: &'static str,
    prices: UsageReport,
}

impl Recorder {
    pub fn new(
        transcript: Arc<Transcript>,
        purpose: &'static str,
        prices: BTreeMap<String, Price>,
    ) -> Recorder {
        Recorder {
            transcript,
            purpose,
            prices: UsageReport::new(prices),
        }
    }
}

impl CallObserver for Recorder {
    fn answered(&self, asked: Option<&str>, took: Duration, answer: &Result<ChatResponse, LlmError>) {
        match answer {
            Ok(response) => {
                let masked = self.transcript.mask(&response.text);
                let (text, _) = entry::fold(&masked.text);
                let entry = Entry::Call {
                    purpose: self.purpose.to_owned(),
                    model: response.model.clone(),
                    text,
                    input_tokens: response.usage.input_tokens,
                    output_tokens: response.usage.output_tokens,
                    cost_usd: self.prices.cost_of(&response.model, response.usage),
                    ms: took.as_millis() as u64,
                };
                self.transcript.write_masked(&entry, masked.rules);
            }
            Err(e) => self.transcript.note(format!(
                "{} call{} failed: {e}",
                self.purpose,
                asked.map(|m| format!(" to {m}")).unwrap_or_default()
            )),
        }
    }
}
