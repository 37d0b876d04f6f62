//! What every Daedalus binary does the same way at the container boundary: JSON-lines logging
//! to stdout (contract level 2) and the SIGTERM/SIGINT sequence (the first signal starts a
//! graceful shutdown; a second one exits at once).

use serde::Serialize;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer, Registry};

/// The shutdown future every binary runs until: the first SIGTERM or SIGINT.
pub type Shutdown = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Exit status of an immediate exit on a second signal (128 + SIGINT, by convention).
pub const FORCED_EXIT_CODE: i32 = 130;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One JSON object a line, with the current span's fields.
    Json,
    /// Human-readable lines.
    Text,
}

/// Where log lines go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogTarget {
    Stdout,
    Stderr,
}

/// A layer of the global subscriber besides the log lines (a binary's trace exporter).
pub type ExtraLayer = Box<dyn Layer<Registry> + Send + Sync>;

/// Installs the global subscriber. `level` is a level (`info`), applied to `crates` while every
/// other crate stays at `warn`, or a full directive list (`info,async_nats=debug`). `extra`
/// layers (a binary's OpenTelemetry layer) see every span with their own filters.
pub fn init_logging(
    level: &str,
    format: LogFormat,
    crates: &[&str],
    target: LogTarget,
    extra: Vec<ExtraLayer>,
) {
    let lines = match target {
        LogTarget::Stdout => log_lines(format, std::io::stdout, filter(level, crates)),
        LogTarget::Stderr => log_lines(format, std::io::stderr, filter(level, crates)),
    };
    let mut layers = vec![lines];
    layers.extend(extra);
    let _ = tracing_subscriber::registry().with(layers).try_init();
}

/// What `level` lets through: a directive list as it is, a bare level for `crates` (others at
/// `warn`).
fn filter(level: &str, crates: &[&str]) -> EnvFilter {
    if level.contains('=') || level.contains(',') {
        EnvFilter::new(level)
    } else {
        let own: Vec<String> = crates.iter().map(|c| format!("{c}={level}")).collect();
        EnvFilter::new(format!("warn,{}", own.join(",")))
    }
}

/// JSON log lines into `file` (a log file beside stdout), under the same level as stdout's.
pub fn file_lines(level: &str, crates: &[&str], file: crate::log_file::RotatingFile) -> ExtraLayer {
    log_lines(LogFormat::Json, file, filter(level, crates))
}

/// The layer that writes log lines in `format` to `writer` (a function, so no line pays for a
/// boxed writer).
fn log_lines<W>(format: LogFormat, writer: W, filter: EnvFilter) -> ExtraLayer
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    match format {
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .with_writer(writer)
            .with_filter(filter)
            .boxed(),
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(writer)
            .with_filter(filter)
            .boxed(),
    }
}

/// Resolves on the first SIGTERM or SIGINT, and arms the second-signal exit.
pub async fn shutdown_signal() {
    wait_for_signal().await;
    tracing::info!("shutdown signal received; send another to exit immediately");
    tokio::spawn(async {
        wait_for_signal().await;
        tracing::warn!("second shutdown signal: exiting now");
        std::process::exit(FORCED_EXIT_CODE);
    });
}

#[cfg(unix)]
async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler installs");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler installs");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

#[cfg(not(unix))]
async fn wait_for_signal() {
    let _ = tokio::signal::ctrl_c().await;
}
