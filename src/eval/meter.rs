//! One instance's model use: every answer's tokens and cost, and the time
//! spent waiting on the models (what the eval's own overhead leaves out).

use crate::llm::observed::CallObserver;
use crate::llm::usage::{Price, UsageReport};
use crate::llm::{ChatResponse, LlmError};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

/// Counts what passes through an observed model.
pub struct Meter {
    counted: Mutex<Counted>,
}

struct Counted {
    usage: UsageReport,
    waited: Duration,
    calls: u64,
}

/// What an instance's model calls came to.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ModelUse {
    pub calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// At the catalogue's prices (a model without one counts 0).
    pub cost_usd: f64,
    pub waited: Duration,
}

impl Meter {
    pub fn new(prices: BTreeMap<String, Price>) -> Meter {
        Meter {
            counted: Mutex::new(Counted {
                usage: UsageReport::new(prices),
                waited: Duration::ZERO,
                calls: 0,
            }),
        }
    }

    pub fn used(&self) -> ModelUse {
        let counted = self.counted.lock().unwrap_or_else(|p| p.into_inner());
        let total = counted.usage.total();
        ModelUse {
            calls: counted.calls,
            input_tokens: total.input_tokens,
            output_tokens: total.output_tokens,
            cost_usd: counted.usage.estimated_cost().0,
            waited: counted.waited,
        }
    }
}

impl CallObserver for Meter {
    fn answered(&self, _asked: Option<&str>, took: Duration, answer: &Result<ChatResponse, LlmError>) {
        let mut counted = self.counted.lock().unwrap_or_else(|p| p.into_inner());
        counted.waited += took;
        counted.calls += 1;
        if let Ok(response) = answer {
            counted.usage.add(&response.model, response.usage);
        }
    }
}
