//! Keeps the agent's consumer in place after startup. If the consumer or the task stream is
//! deleted (by an operator, or lost with a node), pulls stop being answered; a worker that sees
//! that asks for a check, and the keeper also looks on its own every [`CHECK_EVERY`]. A missing
//! consumer or stream is created again with the startup settings, and `/healthz` says
//! `"consumer": "missing"` meanwhile. Each look also reads how many tasks wait on the consumer
//! (`daedalus_proxy_consumer_pending`: behind, when it grows).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_nats::jetstream::{self, Context};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::config::ProxyConfig;
use crate::metrics::Metrics;
use crate::nats;
use crate::wire::subjects;

/// How often the keeper checks the consumer unasked.
pub const CHECK_EVERY: Duration = Duration::from_secs(30);
/// First delay between attempts to create a missing consumer again; doubles up to 5 s.
const RECREATE_RETRY: Duration = Duration::from_millis(250);

/// Whether the consumer is in place, and the bell workers ring when they doubt it.
#[derive(Debug, Default)]
pub struct ConsumerState {
    missing: AtomicBool,
    check: Notify,
}

impl ConsumerState {
    /// A worker's pull got an answer that suggests the consumer is gone.
    pub fn suspect(&self) {
        self.check.notify_one();
    }

    pub fn is_missing(&self) -> bool {
        self.missing.load(Ordering::Acquire)
    }
}

/// What one check found.
#[derive(Debug, PartialEq, Eq)]
enum Found {
    /// In place, with this many task messages not yet delivered to any proxy.
    Present {
        pending: u64,
    },
    Missing,
    /// The server did not say (an election, a timeout): nothing to do now.
    Unknown,
}

async fn look(js: &Context, config: &ProxyConfig) -> Found {
    let name = subjects::consumer(&config.agent);
    let stream = match js.get_stream(&config.streams.tasks).await {
        Ok(stream) => stream,
        Err(e) => {
            return match e.kind() {
                jetstream::context::GetStreamErrorKind::JetStream(js)
                    if js.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND =>
                {
                    Found::Missing
                }
                _ => Found::Unknown,
            };
        }
    };
    match stream.consumer_info(&name).await {
        Ok(info) => Found::Present {
            pending: info.num_pending,
        },
        Err(e) => match e.kind() {
            jetstream::context::ConsumerInfoErrorKind::NotFound
            | jetstream::context::ConsumerInfoErrorKind::StreamNotFound => Found::Missing,
            _ => Found::Unknown,
        },
    }
}

/// Checks the consumer when a worker asks and every [`CHECK_EVERY`], until `stop`; creates it
/// (and the streams) again when it is missing.
pub async fn keep_consumer(
    js: Context,
    config: ProxyConfig,
    state: Arc<ConsumerState>,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
) {
    let mut first = true;
    loop {
        // The first look is at once: the pending count is known from the start.
        if !std::mem::take(&mut first) {
            tokio::select! {
                () = stop.cancelled() => return,
                () = state.check.notified() => {}
                () = tokio::time::sleep(CHECK_EVERY) => {}
            }
        }
        match look(&js, &config).await {
            Found::Present { pending } => {
                metrics
                    .consumer_pending
                    .set(i64::try_from(pending).unwrap_or(i64::MAX));
                continue;
            }
            Found::Unknown => continue,
            Found::Missing => {}
        }
        state.missing.store(true, Ordering::Release);
        tracing::warn!(consumer = %subjects::consumer(&config.agent), "the agent's consumer or the task stream is gone; creating it again");
        let settings = crate::nats::consumer_settings(&config);
        let mut delay = RECREATE_RETRY;
        loop {
            let made = async {
                nats::ensure_streams(&js, &config.streams).await?;
                nats::ensure_consumer(&js, &config.streams, &config.agent, &settings).await
            };
            match made.await {
                Ok(_) => break,
                Err(e) => tracing::warn!(error = %e, "cannot create the consumer again yet"),
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(delay) => {}
            }
            delay = (delay * 2).min(Duration::from_secs(5));
        }
        metrics.consumer_recreated.inc();
        state.missing.store(false, Ordering::Release);
        tracing::info!("the agent's consumer is back; pulling resumes");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_look_reads_how_many_tasks_wait_on_the_consumer() {
        let server = daedalus_test_kit::NatsServer::start();
        let config = ProxyConfig::for_agent("keeper", &server.url(), "http://127.0.0.1:9")
            .expect("a configuration");
        let client = async_nats::connect(server.url()).await.expect("connects");
        let js = async_nats::jetstream::new(client);
        nats::ensure_streams(&js, &config.streams)
            .await
            .expect("streams");
        nats::ensure_consumer(
            &js,
            &config.streams,
            &config.agent,
            &nats::consumer_settings(&config),
        )
        .await
        .expect("the consumer");
        assert_eq!(look(&js, &config).await, Found::Present { pending: 0 });
        for i in 0..3 {
            js.publish(subjects::tasks("keeper"), format!("task {i}").into())
                .await
                .expect("published")
                .await
                .expect("stored");
        }
        assert_eq!(look(&js, &config).await, Found::Present { pending: 3 });
    }
}
