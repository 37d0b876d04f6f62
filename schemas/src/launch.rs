//! What every binary's `main` does alike, so each `main` only launches: the exit codes of a
//! configuration error (2), a `--check-config` print, the `healthcheck` subcommand, the async
//! runtime, the trace exporter and log lines, binding the listener, and running until the
//! first SIGTERM/SIGINT ([`crate::service::shutdown_signal`]).

use std::future::Future;
use std::io::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;

use tokio::net::TcpListener;

use crate::error_chain::error_chain;
use crate::service::{self, LogFormat, LogTarget};
use crate::telemetry;

/// Exit status of a configuration the binary refuses (and of a trace exporter it cannot set up).
pub const CONFIG_ERROR: u8 = 2;

/// A binary: its name in messages and its OpenTelemetry service name, and the crates whose
/// logs follow `LOG_LEVEL` (every other crate logs at `warn`).
#[derive(Debug, Clone, Copy)]
pub struct Binary {
    pub name: &'static str,
    /// The crate whose spans are exported (`daedalus_proxy`).
    pub crate_name: &'static str,
    pub log_crates: &'static [&'static str],
}

/// How to serve: the logs, whether spans are exported, and the address to bind.
#[derive(Debug, Clone)]
pub struct Serving {
    pub log_level: String,
    pub log_format: LogFormat,
    /// Hand every span to the OpenTelemetry layer (off: no span bookkeeping at all).
    pub export_spans: bool,
    pub listen: SocketAddr,
    /// JSON log lines also go to this file, rotated at 10 MB with 5 files kept.
    pub log_file: Option<std::path::PathBuf>,
}

impl Binary {
    /// A configuration that cannot run: said on stderr, exit 2.
    pub fn config_error(&self, error: &dyn std::fmt::Display) -> ExitCode {
        eprintln!("{}: configuration error: {error}", self.name);
        ExitCode::from(CONFIG_ERROR)
    }

    /// `--check-config`: the resolved configuration on stdout, exit 0.
    pub fn print_config(&self, json: &str) -> ExitCode {
        let _ = writeln!(std::io::stdout(), "{json}");
        ExitCode::SUCCESS
    }

    /// `healthcheck`: 0 when `GET path` on `addr` answers 200, else 1 with the reason.
    pub fn healthcheck(&self, addr: SocketAddr, path: &str) -> ExitCode {
        match crate::healthcheck::probe(addr, path) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("{} healthcheck: {e}", self.name);
                ExitCode::FAILURE
            }
        }
    }

    /// The multi-threaded async runtime, or exit 1.
    pub fn async_runtime(&self) -> Result<tokio::runtime::Runtime, ExitCode> {
        tokio::runtime::Runtime::new().map_err(|e| {
            eprintln!("{}: cannot start the async runtime: {e}", self.name);
            ExitCode::FAILURE
        })
    }

    /// Serves until the first shutdown signal: sets up the trace exporter and log lines, binds
    /// `serving.listen`, and runs `run(listener, shutdown)` on `runtime`. Exit 0 when it ends
    /// well, 1 when it fails (logged with its sources) or the address cannot be bound, 2 when
    /// the exporter cannot be set up. The exporter is flushed before returning.
    pub fn serve<R, F, E>(
        &self,
        runtime: &tokio::runtime::Runtime,
        serving: &Serving,
        run: R,
    ) -> ExitCode
    where
        R: FnOnce(TcpListener, service::Shutdown) -> F,
        F: Future<Output = Result<(), E>>,
        E: std::error::Error,
    {
        // The gRPC trace exporter starts its connection on the runtime.
        let entered = runtime.enter();
        let (telemetry, trace_layer) = match telemetry::init(self.name, self.crate_name) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{}: {}", self.name, error_chain(&e));
                return ExitCode::from(CONFIG_ERROR);
            }
        };
        let mut extra = if serving.export_spans {
            vec![trace_layer]
        } else {
            Vec::new()
        };
        if let Some(path) = &serving.log_file {
            match crate::log_file::RotatingFile::open(path) {
                Ok(file) => extra.push(service::file_lines(
                    &serving.log_level,
                    self.log_crates,
                    file,
                )),
                Err(e) => {
                    eprintln!(
                        "{}: cannot open the log file {}: {e}",
                        self.name,
                        path.display()
                    );
                    return ExitCode::from(CONFIG_ERROR);
                }
            }
        }
        service::init_logging(
            &serving.log_level,
            serving.log_format,
            self.log_crates,
            LogTarget::Stdout,
            extra,
        );
        drop(entered);
        let code = runtime.block_on(async {
            let listener = match TcpListener::bind(serving.listen).await {
                Ok(l) => l,
                Err(e) => {
                    tracing::error!(addr = %serving.listen, error = %e, "cannot bind the listening address");
                    return ExitCode::FAILURE;
                }
            };
            match run(listener, Box::pin(service::shutdown_signal())).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!(error = %error_chain(&e), "{} failed", self.name);
                    ExitCode::FAILURE
                }
            }
        });
        telemetry.shutdown();
        code
    }
}
