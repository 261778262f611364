//! Retrying transient Prometheus failures with capped exponential backoff.

use std::future::Future;
use std::time::Duration;

use super::PromError;

#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts in all; `None` retries for ever (the worker).
    pub attempts: Option<u32>,
    pub first_delay: Duration,
    pub max_delay: Duration,
}

impl RetryPolicy {
    /// The CLI: a few quick tries, then a clear error.
    pub fn cli() -> Self {
        Self { attempts: Some(3), first_delay: Duration::from_millis(500), max_delay: Duration::from_secs(5) }
    }

    /// The worker: keeps trying, backing off to a minute.
    pub fn worker() -> Self {
        Self { attempts: None, first_delay: Duration::from_secs(1), max_delay: Duration::from_secs(60) }
    }

    pub fn delay(&self, attempt: u32) -> Duration {
        self.first_delay.saturating_mul(1u32 << attempt.min(16)).min(self.max_delay)
    }
}

/// Runs `op` until it succeeds, fails for good, or the attempts run out; logs every retry.
pub async fn with_retry<T, F, Fut>(policy: RetryPolicy, what: &str, mut op: F) -> Result<T, PromError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, PromError>>,
{
    let mut attempt = 0;
    loop {
        match op().await {
            Ok(v) => return Ok(v),
            Err(e) if e.is_transient() && policy.attempts.is_none_or(|n| attempt + 1 < n) => {
                crate::telemetry::ingest::request_failed(e.kind(), true);
                let delay = policy.delay(attempt);
                tracing::warn!(error = %e, attempt = attempt + 1, retry_in = ?delay, "{what} failed, retrying");
                tokio::time::sleep(delay).await;
                attempt += 1;
            }
            Err(e) => {
                crate::telemetry::ingest::request_failed(e.kind(), false);
                return Err(e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let p = RetryPolicy::worker();
        assert_eq!(p.delay(0), Duration::from_secs(1));
        assert_eq!(p.delay(3), Duration::from_secs(8));
        assert_eq!(p.delay(10), Duration::from_secs(60));
        assert_eq!(p.delay(u32::MAX), Duration::from_secs(60));
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_after_the_attempts_and_not_on_permanent_errors() {
        let mut calls = 0;
        let r: Result<(), _> = with_retry(RetryPolicy::cli(), "test", || {
            calls += 1;
            async { Err(PromError::Status { status: 503, body: String::new() }) }
        })
        .await;
        assert!(r.is_err());
        assert_eq!(calls, 3);
        let mut calls = 0;
        let r: Result<(), _> = with_retry(RetryPolicy::worker(), "test", || {
            calls += 1;
            async { Err(PromError::Query { error_type: "bad_data".into(), error: String::new() }) }
        })
        .await;
        assert!(r.is_err());
        assert_eq!(calls, 1);
    }
}
