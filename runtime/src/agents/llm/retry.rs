//! The retry policy of the LLM clients: 408/409/429/5xx, timeouts and transport errors are
//! retried with exponential backoff; a `Retry-After` header (seconds or an HTTP date) wins.

use std::future::Future;
use std::time::Duration;

use super::{LlmError, LlmEvent};

/// How often and how patiently to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
        }
    }
}

/// A failed attempt, with the server's `Retry-After` if it sent one.
#[derive(Debug)]
pub struct Failure {
    pub error: LlmError,
    pub retry_after: Option<Duration>,
}

impl From<LlmError> for Failure {
    fn from(error: LlmError) -> Self {
        Self {
            error,
            retry_after: None,
        }
    }
}

impl RetryPolicy {
    /// The wait before attempt `next` (2-based): the server's `Retry-After` if given (capped
    /// at `max_delay`), else `base_delay`·2^(next-2), capped.
    pub fn delay(&self, next: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(d) = retry_after {
            return d.min(self.max_delay);
        }
        let factor = 2u32.saturating_pow(next.saturating_sub(2));
        self.base_delay
            .checked_mul(factor)
            .map_or(self.max_delay, |d| d.min(self.max_delay))
    }

    /// Runs `attempt` until it succeeds, fails for good, or attempts run out.
    pub async fn run<T, F, Fut>(
        &self,
        provider: &'static str,
        events: &(dyn Fn(LlmEvent) + Send + Sync),
        mut attempt: F,
    ) -> Result<T, LlmError>
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<T, Failure>>,
    {
        let mut n = 1;
        loop {
            match attempt(n).await {
                Ok(value) => return Ok(value),
                Err(failure) if failure.error.is_retryable() && n < self.max_attempts => {
                    let delay = self.delay(n + 1, failure.retry_after);
                    tracing::warn!(provider, attempt = n, ?delay, error = %failure.error, "LLM request failed; retrying");
                    events(LlmEvent::Retrying {
                        attempt: n,
                        delay,
                        reason: failure.error.to_string(),
                    });
                    tokio::time::sleep(delay).await;
                    n += 1;
                }
                Err(failure) if n > 1 => {
                    return Err(LlmError::Exhausted {
                        provider,
                        attempts: n,
                        last: Box::new(failure.error),
                    });
                }
                Err(failure) => return Err(failure.error),
            }
        }
    }
}

/// Parses `Retry-After`: delta-seconds (`"2"`, `"1.5"`) or an HTTP date.
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).ok();
    }
    let when = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let wait = when.with_timezone(&chrono::Utc) - chrono::Utc::now();
    Some(wait.to_std().unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_forms() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(
            parse_retry_after(" 0.25 "),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO),
            "a past date: now"
        );
        let later = (chrono::Utc::now() + chrono::TimeDelta::seconds(30)).to_rfc2822();
        let d = parse_retry_after(&later).unwrap();
        assert!(
            d > Duration::from_secs(25) && d <= Duration::from_secs(30),
            "{d:?}"
        );
        assert_eq!(parse_retry_after("soon"), None);
    }

    #[test]
    fn delays_double_cap_and_yield_to_retry_after() {
        let p = RetryPolicy {
            max_attempts: 6,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(350),
        };
        let delays: Vec<u128> = (2..=5).map(|n| p.delay(n, None).as_millis()).collect();
        assert_eq!(delays, [100, 200, 350, 350]);
        assert_eq!(
            p.delay(2, Some(Duration::from_millis(300))),
            Duration::from_millis(300)
        );
        assert_eq!(
            p.delay(2, Some(Duration::from_secs(9))),
            Duration::from_millis(350)
        );
    }
}
