//! Waiting out overload: 1 s doubling to 30 s, 5 retries, with the
//! provider's `Retry-After` taking the place of the computed wait.

use super::LlmError;
use backon::{ExponentialBuilder, Retryable};
use std::future::Future;
use std::time::Duration;

pub use crate::config::RetryPolicy;

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            max_retries: 5,
        }
    }
}

impl RetryPolicy {
    /// Runs `attempt` until it succeeds, fails in a way waiting cannot fix,
    /// or the retries run out.
    pub async fn run<T, F, Fut>(&self, what: &str, attempt: F) -> Result<T, LlmError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, LlmError>>,
    {
        let backoff = ExponentialBuilder::default()
            .with_min_delay(self.initial_backoff)
            .with_max_delay(self.max_backoff)
            .with_factor(2.0)
            .with_max_times(self.max_retries);
        let cap = self.max_backoff;
        attempt
            .retry(backoff)
            .sleep(tokio::time::sleep)
            .when(LlmError::is_retryable)
            // A provider that says how long to wait knows best (bounded).
            .adjust(
                move |err: &LlmError, computed| match (computed, err.retry_after()) {
                    (Some(_), Some(wait)) => Some(wait.min(cap.max(Duration::from_secs(60)))),
                    (computed, _) => computed,
                },
            )
            .notify(|err: &LlmError, wait: Duration| {
                tracing::warn!(model = %what, "{err}; retrying in {:.1} s", wait.as_secs_f64());
            })
            .await
    }
}
