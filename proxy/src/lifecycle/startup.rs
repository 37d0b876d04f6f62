//! Startup as named steps, each retried with backoff until `STARTUP_TIMEOUT`: connect to NATS,
//! make sure the streams exist, create or update the agent's consumer, wait for the runtime's
//! `/health`, read its agent card, check its manifest. A step that fails for a reason that may
//! pass (a leader election, a runtime still starting) is tried again; one that cannot pass (a
//! conflicting stream or consumer, a card without skills, another contract major) stops
//! startup at once. At the deadline the error names the step that did not finish.

use std::future::Future;
use std::time::Duration;

use async_nats::jetstream::consumer::{Consumer, pull};
use tokio::time::Instant;

use crate::config::ProxyConfig;
use crate::error::{ProxyError, StartupError, Step};
use crate::forward::http::{CredentialCheckError, HttpRuntime, RuntimeCheckError};
use crate::nats::{self, NatsError, consumer_settings};

/// Whether an error of a step may pass if the step is tried again.
pub trait Transience {
    fn is_transient(&self) -> bool;
}

impl Transience for NatsError {
    fn is_transient(&self) -> bool {
        match self {
            NatsError::Connect { .. } | NatsError::Stream { .. } | NatsError::Consumer { .. } => {
                true
            }
            NatsError::Credentials { .. }
            | NatsError::StreamConflict { .. }
            | NatsError::ConsumerConflict { .. } => false,
        }
    }
}

impl Transience for RuntimeCheckError {
    fn is_transient(&self) -> bool {
        match self {
            RuntimeCheckError::Unhealthy(_)
            | RuntimeCheckError::CardUnreadable { .. }
            | RuntimeCheckError::ManifestUnreadable(_) => true,
            RuntimeCheckError::CardInvalid(_)
            | RuntimeCheckError::CardUntrusted(_)
            | RuntimeCheckError::CardWithoutSkills
            | RuntimeCheckError::ManifestIncompatible { .. } => false,
        }
    }
}

impl Transience for CredentialCheckError {
    fn is_transient(&self) -> bool {
        match self {
            // A token endpoint that refuses the proxy's client (a wrong secret) refuses it
            // again: startup stops at once. One that does not answer may yet.
            CredentialCheckError::NoToken(why) => !why.is_lasting(),
            CredentialCheckError::Unreached(_) => true,
            CredentialCheckError::Refused { .. } => false,
        }
    }
}

/// The first retry delay of a step; it doubles up to [`MAX_DELAY`].
const FIRST_DELAY: Duration = Duration::from_millis(100);
const MAX_DELAY: Duration = Duration::from_secs(2);

/// Runs `attempt` until it succeeds, fails for good, or `deadline` passes. The first failure
/// of a step is logged at INFO (waiting is normal at startup), later ones at DEBUG.
pub async fn retry<T, E, F>(
    step: Step,
    deadline: Instant,
    started: Instant,
    mut attempt: impl FnMut() -> F,
) -> Result<T, ProxyError>
where
    E: Transience + std::fmt::Display + Into<ProxyError>,
    F: Future<Output = Result<T, E>>,
{
    let mut delay = FIRST_DELAY;
    let mut tries = 0u32;
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let Ok(outcome) = tokio::time::timeout(remaining, attempt()).await else {
            return Err(StartupError::Deadline {
                step,
                timeout: deadline.saturating_duration_since(started),
                last: "the attempt was still running".to_owned(),
            }
            .into());
        };
        let error = match outcome {
            Ok(value) => return Ok(value),
            Err(e) if !e.is_transient() => return Err(e.into()),
            Err(e) => e,
        };
        tries += 1;
        if Instant::now() + delay >= deadline {
            return Err(StartupError::Deadline {
                step,
                timeout: deadline.saturating_duration_since(started),
                last: error.to_string(),
            }
            .into());
        }
        if tries == 1 {
            tracing::info!(%step, error = %error, "startup waits; retrying until STARTUP_TIMEOUT");
        } else {
            tracing::debug!(%step, error = %error, tries, "startup step retried");
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(MAX_DELAY);
    }
}

/// What startup hands to consuming.
#[derive(Debug)]
pub struct Ready {
    pub client: async_nats::Client,
    pub consumer: Consumer<pull::Config>,
    /// The runtime's card says it streams (`capabilities.streaming`): tasks are sent asking
    /// for their event stream, relayed to NATS as it arrives.
    pub streams: bool,
}

/// Every step of startup, in order, under one deadline.
pub async fn start(
    config: &ProxyConfig,
    runtime: &HttpRuntime,
    on_connected: impl FnOnce(&async_nats::Client),
) -> Result<Ready, ProxyError> {
    let started = Instant::now();
    let deadline = started + config.startup_timeout;
    let client = connect_nats(config, deadline, started).await?;
    on_connected(&client);
    let js = async_nats::jetstream::new(client.clone());
    retry(Step::EnsureStreams, deadline, started, || {
        nats::ensure_streams(&js, &config.streams)
    })
    .await?;
    let settings = consumer_settings(config);
    let consumer = retry(Step::EnsureConsumer, deadline, started, || {
        nats::ensure_consumer(&js, &config.streams, &config.agent, &settings)
    })
    .await?;
    retry(Step::RuntimeHealthy, deadline, started, || runtime.health()).await?;
    tracing::info!("the runtime is healthy");
    let card = retry(Step::AgentCard, deadline, started, || runtime.agent_card()).await?;
    let streams = card.capabilities.streaming == Some(true);
    tracing::info!(agent_card = %card.name, skills = card.skills.len(), streams, "agent card checked");
    let manifest = retry(Step::Manifest, deadline, started, || {
        runtime.check_manifest()
    })
    .await?;
    if let Some(m) = manifest {
        tracing::info!(contract = %m.contract_version, level = m.conformance_level, "runtime manifest checked");
    } else {
        tracing::info!("runtime serves no manifest; assuming contract v1");
    }
    retry(Step::RuntimeCredential, deadline, started, || {
        runtime.check_credential()
    })
    .await?;
    Ok(Ready {
        client,
        consumer,
        streams,
    })
}

/// Connects to NATS (its own retry loop: the connect options are built once per attempt).
async fn connect_nats(
    config: &ProxyConfig,
    deadline: Instant,
    started: Instant,
) -> Result<async_nats::Client, ProxyError> {
    let name = format!("daedalus-proxy-{}", config.agent);
    retry(Step::ConnectNats, deadline, started, || {
        nats::connect_once(&config.nats, &name)
    })
    .await
}

#[cfg(test)]
mod tests {
    use std::fmt;

    use super::*;

    #[derive(Debug)]
    struct Flaky(bool);

    impl fmt::Display for Flaky {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(if self.0 { "not yet" } else { "never" })
        }
    }

    impl Transience for Flaky {
        fn is_transient(&self) -> bool {
            self.0
        }
    }

    impl From<Flaky> for ProxyError {
        fn from(e: Flaky) -> Self {
            ProxyError::Runtime(RuntimeCheckError::Unhealthy(e.to_string()))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_transient_failure_is_retried_until_it_passes() {
        let started = Instant::now();
        let mut calls = 0;
        let out = retry(
            Step::EnsureStreams,
            started + Duration::from_mins(1),
            started,
            || {
                calls += 1;
                let n = calls;
                async move { if n < 4 { Err(Flaky(true)) } else { Ok(n) } }
            },
        )
        .await;
        assert_eq!(out.ok(), Some(4));
    }

    #[tokio::test(start_paused = true)]
    async fn a_lasting_failure_stops_at_once() {
        let started = Instant::now();
        let mut calls = 0;
        let out: Result<(), _> = retry(
            Step::AgentCard,
            started + Duration::from_mins(1),
            started,
            || {
                calls += 1;
                async { Err(Flaky(false)) }
            },
        )
        .await;
        assert!(matches!(out, Err(ProxyError::Runtime(_))));
        assert_eq!(calls, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_names_the_step_that_did_not_finish() {
        let started = Instant::now();
        let out: Result<(), _> = retry(
            Step::EnsureConsumer,
            started + Duration::from_secs(5),
            started,
            || async { Err(Flaky(true)) },
        )
        .await;
        match out {
            Err(ProxyError::Startup(StartupError::Deadline { step, last, .. })) => {
                assert_eq!(step, Step::EnsureConsumer);
                assert_eq!(last, "not yet");
            }
            other => panic!("expected a deadline, got {other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_that_hangs_is_cut_at_the_deadline() {
        let started = Instant::now();
        let out: Result<(), _> = retry(
            Step::RuntimeHealthy,
            started + Duration::from_secs(5),
            started,
            std::future::pending::<Result<(), Flaky>>,
        )
        .await;
        assert!(matches!(
            out,
            Err(ProxyError::Startup(StartupError::Deadline {
                step: Step::RuntimeHealthy,
                ..
            }))
        ));
    }
}
