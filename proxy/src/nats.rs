//! NATS: connecting (with retries and the configured credentials) and making sure the streams
//! and the agent's durable consumer exist as docs/design.md §5 describes.
//!
//! Existing streams are never changed: one that cannot serve (wrong retention, subjects that do
//! not cover ours) stops startup with a message saying why. The consumer is created or updated
//! to our settings, except that a filter other than ours is a startup error: it would mean
//! another deployment owns the name.

use std::time::Duration;

use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, pull};
use async_nats::jetstream::stream::{self, RetentionPolicy, StorageType};
use async_nats::jetstream::{self, Context};
use async_nats::{Client, ConnectOptions};
use tokio::time::Instant;

use crate::config::{NatsConfig, ProxyConfig, StreamsConfig};
use crate::wire::subjects;

/// Duplicate window of the task stream: a re-publish with the same `Nats-Msg-Id` inside it is
/// dropped.
pub const DUPLICATE_WINDOW: Duration = Duration::from_mins(2);
/// How long dead letters are kept.
const DEADLETTER_MAX_AGE: Duration = Duration::from_hours(7 * 24);

use daedalus_contract::redact::redact_url;

/// Why NATS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum NatsError {
    #[error("cannot reach NATS at {url}: {last}")]
    Connect { url: String, last: String },
    #[error("cannot read the NATS credentials file {path}")]
    Credentials {
        path: String,
        source: std::io::Error,
    },
    #[error("JetStream request about stream {stream} failed: {reason}")]
    Stream { stream: String, reason: String },
    #[error(
        "stream {stream} exists but cannot serve: {reason}; fix or remove it (it is never changed silently)"
    )]
    StreamConflict { stream: String, reason: String },
    #[error(
        "consumer {consumer} on {stream} filters {found:?}, expected {expected:?}; another deployment may own it"
    )]
    ConsumerConflict {
        stream: String,
        consumer: String,
        found: String,
        expected: String,
    },
    #[error("cannot create or update consumer {consumer}: {reason}")]
    Consumer { consumer: String, reason: String },
}

/// The connect options for `config` (credentials and TLS), without retry.
async fn options(config: &NatsConfig, name: &str) -> Result<ConnectOptions, NatsError> {
    let mut options = ConnectOptions::new()
        .name(name)
        .connection_timeout(Duration::from_secs(5))
        .ping_interval(Duration::from_secs(10));
    if let (Some(user), Some(password)) = (&config.user, &config.password) {
        options = options.user_and_password(user.clone(), password.expose().to_owned());
    }
    if let Some(token) = &config.token {
        options = options.token(token.expose().to_owned());
    }
    if let Some(path) = &config.creds_file {
        options =
            options
                .credentials_file(path)
                .await
                .map_err(|source| NatsError::Credentials {
                    path: path.display().to_string(),
                    source,
                })?;
    }
    if let Some(ca) = &config.tls_ca {
        options = options.add_root_certificates(ca.clone()).require_tls(true);
    }
    Ok(options)
}

/// One attempt to connect to any of the configured servers.
pub async fn connect_once(config: &NatsConfig, name: &str) -> Result<Client, NatsError> {
    match options(config, name).await?.connect(config.servers()).await {
        Ok(client) => {
            tracing::info!(url = %redact_url(&config.url), "connected to NATS");
            Ok(client)
        }
        Err(e) => Err(NatsError::Connect {
            url: redact_url(&config.url),
            last: redact_url(&e.to_string()),
        }),
    }
}

/// Connects, retrying with exponential backoff (250 ms doubling to 5 s) until `deadline`.
pub async fn connect(
    config: &NatsConfig,
    name: &str,
    deadline: Instant,
) -> Result<Client, NatsError> {
    let mut delay = Duration::from_millis(250);
    loop {
        match connect_once(config, name).await {
            Ok(client) => return Ok(client),
            Err(e @ NatsError::Connect { .. }) if Instant::now() + delay <= deadline => {
                tracing::warn!(error = %e, retry_in = ?delay, "cannot connect to NATS yet");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
            Err(e) => return Err(e),
        }
    }
}

fn stream_error(stream: &str, e: impl std::fmt::Display) -> NatsError {
    NatsError::Stream {
        stream: stream.to_owned(),
        reason: e.to_string(),
    }
}

/// Makes sure the task, result and dead-letter streams exist; returns the task stream.
pub async fn ensure_streams(js: &Context, streams: &StreamsConfig) -> Result<(), NatsError> {
    ensure_stream(
        js,
        stream::Config {
            name: streams.tasks.clone(),
            subjects: vec![subjects::TASKS_WILDCARD.to_owned()],
            retention: RetentionPolicy::WorkQueue,
            storage: StorageType::File,
            num_replicas: usize::from(streams.replicas),
            duplicate_window: DUPLICATE_WINDOW,
            ..Default::default()
        },
        subjects::TASKS_WILDCARD,
    )
    .await?;
    ensure_stream(
        js,
        stream::Config {
            name: streams.results.clone(),
            subjects: vec![subjects::RESULTS_WILDCARD.to_owned()],
            retention: RetentionPolicy::Limits,
            storage: StorageType::File,
            max_age: streams.results_max_age,
            num_replicas: usize::from(streams.replicas),
            allow_direct: true,
            duplicate_window: DUPLICATE_WINDOW,
            ..Default::default()
        },
        subjects::RESULTS_WILDCARD,
    )
    .await?;
    ensure_stream(
        js,
        stream::Config {
            name: streams.deadletter.clone(),
            subjects: vec![subjects::DEADLETTER_WILDCARD.to_owned()],
            retention: RetentionPolicy::Limits,
            storage: StorageType::File,
            max_age: DEADLETTER_MAX_AGE,
            num_replicas: usize::from(streams.replicas),
            duplicate_window: DUPLICATE_WINDOW,
            ..Default::default()
        },
        subjects::DEADLETTER_WILDCARD,
    )
    .await
}

async fn ensure_stream(
    js: &Context,
    wanted: stream::Config,
    covers: &str,
) -> Result<(), NatsError> {
    let name = wanted.name.clone();
    match js.get_stream(&name).await {
        Ok(mut existing) => {
            let info = existing.info().await.map_err(|e| stream_error(&name, e))?;
            let config = &info.config;
            if config.retention != wanted.retention {
                return Err(NatsError::StreamConflict {
                    stream: name,
                    reason: format!(
                        "retention is {:?}, expected {:?}",
                        config.retention, wanted.retention
                    ),
                });
            }
            if !config
                .subjects
                .iter()
                .any(|s| s == covers || s == ">" || s == "agent.>")
            {
                return Err(NatsError::StreamConflict {
                    stream: name,
                    reason: format!("its subjects {:?} do not include {covers}", config.subjects),
                });
            }
            if wanted.allow_direct && !config.allow_direct {
                tracing::warn!(stream = %name, "direct get is off on the existing stream; publishers fall back to subscriptions");
            }
            tracing::debug!(stream = %name, "stream exists");
            Ok(())
        }
        Err(e) if is_not_found(&e) => {
            js.create_stream(wanted)
                .await
                .map_err(|e| stream_error(&name, e))?;
            tracing::info!(stream = %name, "created stream");
            Ok(())
        }
        Err(e) => Err(stream_error(&name, e)),
    }
}

fn is_not_found(e: &jetstream::context::GetStreamError) -> bool {
    matches!(e.kind(), jetstream::context::GetStreamErrorKind::JetStream(js)
        if js.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND)
}

/// The settings of an agent's durable consumer.
#[derive(Debug, Clone)]
pub struct ConsumerSettings {
    pub ack_wait: Duration,
    pub max_deliver: u32,
}

/// Creates the agent's durable consumer, or updates it to `settings`. A different filter is a
/// conflict; `filter_subjects` is never used (nats-server 2.9 ignores it).
pub async fn ensure_consumer(
    js: &Context,
    streams: &StreamsConfig,
    agent: &str,
    settings: &ConsumerSettings,
) -> Result<jetstream::consumer::Consumer<pull::Config>, NatsError> {
    let name = subjects::consumer(agent);
    let filter = subjects::tasks(agent);
    let stream = js
        .get_stream(&streams.tasks)
        .await
        .map_err(|e| stream_error(&streams.tasks, e))?;
    if let Ok(info) = stream.consumer_info(&name).await {
        let found = &info.config;
        let found_filter = if found.filter_subjects.is_empty() {
            found.filter_subject.clone()
        } else {
            found.filter_subjects.join(",")
        };
        if found_filter != filter {
            return Err(NatsError::ConsumerConflict {
                stream: streams.tasks.clone(),
                consumer: name,
                found: found_filter,
                expected: filter,
            });
        }
    }
    let config = pull::Config {
        durable_name: Some(name.clone()),
        filter_subject: filter,
        ack_policy: AckPolicy::Explicit,
        deliver_policy: DeliverPolicy::All,
        ack_wait: settings.ack_wait,
        max_deliver: i64::from(settings.max_deliver),
        max_ack_pending: 10_000,
        ..Default::default()
    };
    stream
        .create_consumer(config)
        .await
        .map_err(|e| NatsError::Consumer {
            consumer: name,
            reason: e.to_string(),
        })
}
/// The consumer settings `config` asks for.
pub fn consumer_settings(config: &ProxyConfig) -> ConsumerSettings {
    ConsumerSettings {
        ack_wait: config.ack_wait,
        max_deliver: config.max_deliver,
    }
}
