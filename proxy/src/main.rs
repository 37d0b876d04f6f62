//! `daedalus-proxy`: parse the configuration, set up logging, run the sidecar (or `publish`).

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};

use daedalus_contract::service::{self, LogTarget};
use daedalus_contract::telemetry;
use daedalus_proxy::config::{ConfigError, Launch, LogFormat, PublishConfig};
use daedalus_proxy::publish::{self, Published};

fn main() -> ExitCode {
    let launch = match Launch::from_sources(std::env::args_os(), &|k| std::env::var(k).ok()) {
        Ok(launch) => launch,
        Err(ConfigError::Cli(e)) => e.exit(),
        Err(e) => {
            eprintln!("daedalus-proxy: configuration error: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("daedalus-proxy: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match launch {
        Launch::Healthcheck(addr) => {
            match daedalus_contract::healthcheck::probe(addr, "/healthz") {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("daedalus-proxy healthcheck: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Launch::CheckConfig(config) => {
            let mut out = std::io::stdout();
            let _ = writeln!(out, "{}", config.to_pretty_json());
            ExitCode::SUCCESS
        }
        Launch::Publish(config) => {
            // publish prints the Task on stdout; its own logs go to stderr, warnings only.
            service::init_logging("warn", LogFormat::Text, &[], LogTarget::Stderr, Vec::new());
            runtime.block_on(run_publish(&config))
        }
        Launch::Run(config) => {
            let crates = ["daedalus_proxy", "daedalus_contract"];
            // The gRPC trace exporter starts its connection on the runtime.
            let entered = runtime.enter();
            let (telemetry, trace_layer) = match telemetry::init("daedalus-proxy", "daedalus_proxy")
            {
                Ok(t) => t,
                Err(e) => {
                    let cause = std::error::Error::source(&e).map(ToString::to_string);
                    eprintln!("daedalus-proxy: {e}: {}", cause.unwrap_or_default());
                    return ExitCode::from(2);
                }
            };
            service::init_logging(
                &config.log_level,
                config.log_format,
                &crates,
                LogTarget::Stdout,
                // Without export, no span is handed to OpenTelemetry: it would cost every task
                // its span bookkeeping for nothing (the proxy makes its trace ids itself).
                if config.export_spans {
                    vec![trace_layer]
                } else {
                    Vec::new()
                },
            );
            drop(entered);
            let code = runtime.block_on(async {
                let listener = match tokio::net::TcpListener::bind(config.listen).await {
                    Ok(l) => l,
                    Err(e) => {
                        tracing::error!(addr = %config.listen, error = %e, "cannot bind PROXY_PORT");
                        return ExitCode::FAILURE;
                    }
                };
                match Box::pin(daedalus_proxy::run(listener, config, service::shutdown_signal()))
                    .await
                {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(e) => {
                        tracing::error!(error = %e, "proxy failed");
                        ExitCode::FAILURE
                    }
                }
            });
            telemetry.shutdown();
            code
        }
    }
}

async fn run_publish(config: &PublishConfig) -> ExitCode {
    let request = match publish::build_request(config, publish::read_stdin) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("daedalus-proxy publish: {e}");
            return ExitCode::from(1);
        }
    };
    let spinner = publish::stderr_is_tty() && config.wait && !config.json;
    let ticks = AtomicUsize::new(0);
    let progress = || {
        if spinner {
            let frames = ['|', '/', '-', '\\'];
            let n = ticks.fetch_add(1, Ordering::Relaxed);
            eprint!(
                "\r{} waiting for the result of {} ",
                frames[n % 4],
                request.message.effective_task_id()
            );
        }
    };
    let trace = publish::trace(config);
    // On stderr, so `--json` output stays one document: the id to look the task up by.
    eprintln!("trace {}", trace.span.trace_id_hex());
    let outcome = publish::publish(config, &request, &trace, progress).await;
    if spinner {
        eprint!("\r\x1b[2K");
    }
    let mut out = std::io::stdout();
    match outcome {
        Ok(Published::Sent {
            task_id,
            message_id,
            duplicate,
        }) => {
            let note = if duplicate {
                " (duplicate: already published)"
            } else {
                ""
            };
            let _ = writeln!(out, "published task {task_id} (message {message_id}){note}");
            ExitCode::SUCCESS
        }
        Ok(published @ Published::Result(_)) => {
            let Published::Result(task) = &published else {
                unreachable!()
            };
            if config.json {
                let _ = writeln!(
                    out,
                    "{}",
                    serde_json::to_string_pretty(task.as_ref()).unwrap_or_default()
                );
            } else {
                let _ = write!(out, "{}", publish::describe(task));
            }
            ExitCode::from(published.exit_code())
        }
        Err(e) => {
            eprintln!("daedalus-proxy publish: {e}");
            ExitCode::from(1)
        }
    }
}
