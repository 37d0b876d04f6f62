//! Logging: JSON lines (or text) to stdout, filtered by `LOG_LEVEL`; other crates are held at
//! `warn` unless the filter names them.

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Installs the global subscriber. `level` is a level (`info`) or a directive list
/// (`info,daedalus_runtime=debug`); it was validated with the configuration.
pub fn init(level: &str, format: LogFormat) {
    let filter = if level.contains('=') || level.contains(',') {
        EnvFilter::new(level)
    } else {
        EnvFilter::new(format!(
            "warn,daedalus_runtime={level},daedalus_schemas={level}"
        ))
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stdout);
    let _ = match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
