//! When a forge request is sent again, shared by both forges.
//!
//! A request that failed with a 5xx or a broken connection may still have
//! been carried out by the forge. Reads and writes that land in the same
//! state when repeated (GET, PATCH, PUT, DELETE, adding labels) are retried
//! here with backoff. A request that creates something (a comment, a PR/MR)
//! is not: sent twice it would make two, so its caller looks first and
//! creates only what is not there (see `task::claim` and `task::deliver`).

use super::ForgeError;
use std::future::Future;
use std::time::Duration;

/// Rate-limit waits up to this long are waited out inline; longer ones go
/// back to the caller (the poll loop waits, a task is deferred).
pub const MAX_INLINE_WAIT: Duration = Duration::from_secs(60);

/// Whether a request may be sent again after a failure whose outcome is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeat {
    /// Repeating it changes nothing more than sending it once.
    Safe,
    /// It creates something: sent again only when it surely did not arrive.
    Once,
}

/// The backoff between attempts: 0.5 s doubling up to 8 s, with jitter,
/// six attempts in all (about 20 s), enough to ride out a forge's hiccup.
fn backoff() -> backon::ExponentialBuilder {
    backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(500))
        .with_max_delay(Duration::from_secs(8))
        .with_max_times(5)
        .with_jitter()
}

/// Whether `err` is worth another attempt of a request sent with `repeat`.
pub fn worth_retrying(err: &ForgeError, repeat: Repeat) -> bool {
    match err {
        // Refused before it was looked at: nothing happened.
        ForgeError::RateLimited { retry_after, .. } => *retry_after <= MAX_INLINE_WAIT,
        ForgeError::Api { status, .. } => *status >= 500 && repeat == Repeat::Safe,
        ForgeError::Network { .. } => repeat == Repeat::Safe,
        _ => false,
    }
}

/// Runs `attempt` until it succeeds, fails for good, or the attempts run out.
pub async fn send_with_retries<T, F, Fut>(repeat: Repeat, what: &str, attempt: F) -> Result<T, ForgeError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ForgeError>>,
{
    backon::Retryable::retry(attempt, backoff())
        .when(|e: &ForgeError| worth_retrying(e, repeat))
        .adjust(|e: &ForgeError, delay| match e {
            ForgeError::RateLimited { retry_after, .. } => Some(*retry_after),
            _ => delay,
        })
        .notify(|e: &ForgeError, wait| {
            tracing::debug!("{what}: {e}; trying again in {} ms", wait.as_millis());
        })
        .await
}

/// Looks for what `create` would make, and creates it only when `find`
/// comes back empty; a failure that may have created it anyway (5xx, a
/// broken connection) is followed by another look, never by a blind repeat,
/// and so is a refusal because it exists already (made between the look
/// and the creation): what exists is the answer.
pub async fn find_or_create<T, Find, FindFut, Create, CreateFut>(
    what: &str,
    mut find: Find,
    mut create: Create,
) -> Result<T, ForgeError>
where
    Find: FnMut() -> FindFut,
    FindFut: Future<Output = Result<Option<T>, ForgeError>>,
    Create: FnMut() -> CreateFut,
    CreateFut: Future<Output = Result<T, ForgeError>>,
{
    let mut delays = backon::BackoffBuilder::build(backoff());
    loop {
        let result = match find().await {
            Ok(Some(existing)) => return Ok(existing),
            Ok(None) => create().await,
            Err(e) => Err(e),
        };
        let err = match result {
            Ok(made) => return Ok(made),
            Err(e) => e,
        };
        if err.is_conflict() {
            tracing::info!("{what}: {err}; looking for what exists instead");
            return match find().await {
                Ok(Some(existing)) => Ok(existing),
                _ => Err(err),
            };
        }
        let waitable = err.is_retryable() && err.retry_after().is_none_or(|w| w <= MAX_INLINE_WAIT);
        let Some(delay) = delays.next().filter(|_| waitable) else {
            return Err(err);
        };
        let wait = err.retry_after().unwrap_or(delay);
        tracing::info!(
            "{what}: {err}; looking again in {} ms before creating it",
            wait.as_millis()
        );
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn server_error() -> ForgeError {
        ForgeError::Api {
            forge: "github",
            what: "post a comment".into(),
            status: 502,
            message: "Bad Gateway".into(),
        }
    }

    #[test]
    fn creations_are_not_repeated_blindly() {
        assert!(worth_retrying(&server_error(), Repeat::Safe));
        assert!(!worth_retrying(&server_error(), Repeat::Once));
        let limited = ForgeError::RateLimited {
            forge: "github",
            retry_after: Duration::from_secs(3),
        };
        assert!(
            worth_retrying(&limited, Repeat::Once),
            "a refused request did nothing"
        );
        let long = ForgeError::RateLimited {
            forge: "github",
            retry_after: Duration::from_secs(3600),
        };
        assert!(
            !worth_retrying(&long, Repeat::Safe),
            "an hour's wait is the caller's"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_lost_answer_is_found_instead_of_created_again() {
        // The first creation arrives but its answer is a 502.
        let created = AtomicU32::new(0);
        let on_forge = std::sync::Mutex::new(None::<u64>);
        let id = find_or_create(
            "post a comment",
            || async { Ok(*on_forge.lock().unwrap()) },
            || async {
                created.fetch_add(1, Ordering::SeqCst);
                *on_forge.lock().unwrap() = Some(7);
                Err::<u64, _>(server_error())
            },
        )
        .await
        .unwrap();
        assert_eq!(id, 7);
        assert_eq!(created.load(Ordering::SeqCst), 1, "created once");
    }

    #[tokio::test(start_paused = true)]
    async fn one_made_meanwhile_by_someone_else_is_found_not_failed_on() {
        // Someone opens the PR between the look and the creation.
        let looks = AtomicU32::new(0);
        let id = find_or_create(
            "open the draft PR/MR",
            || async {
                let n = looks.fetch_add(1, Ordering::SeqCst);
                Ok((n > 0).then_some(9u64))
            },
            || async {
                Err::<u64, _>(ForgeError::Api {
                    forge: "github",
                    what: "open the draft PR/MR".into(),
                    status: 422,
                    message: "Validation Failed: A pull request already exists for acme:forgehand/issue-1."
                        .into(),
                })
            },
        )
        .await
        .unwrap();
        assert_eq!(id, 9);
        let refused = find_or_create(
            "post a comment",
            || async { Ok(None::<u64>) },
            || async {
                Err::<u64, _>(ForgeError::Api {
                    forge: "github",
                    what: "post a comment".into(),
                    status: 422,
                    message: "Validation Failed: body is too long".into(),
                })
            },
        )
        .await;
        assert!(refused.is_err(), "another refusal stays one");
    }
}
