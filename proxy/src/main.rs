//! `daedalus-proxy`: parse the configuration, set up logging, run the sidecar (or `publish`).

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};

use daedalus_contract::launch::{Binary, Serving};
use daedalus_contract::service::{self, LogTarget};
use daedalus_proxy::config::{ConfigError, Launch, LogFormat, PublishConfig};
use daedalus_proxy::publish::{self, Follower, Published};

const PROXY: Binary = Binary {
    name: "daedalus-proxy",
    crate_name: "daedalus_proxy",
    log_crates: &["daedalus_proxy", "daedalus_contract"],
};

fn main() -> ExitCode {
    let launch = match Launch::from_sources(std::env::args_os(), &|k| std::env::var(k).ok()) {
        Ok(launch) => launch,
        Err(ConfigError::Cli(e)) => e.exit(),
        Err(e) => return PROXY.config_error(&e),
    };
    let runtime = match PROXY.async_runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    match launch {
        Launch::Healthcheck(addr) => PROXY.healthcheck(addr, "/healthz"),
        Launch::CheckConfig(config) => PROXY.print_config(&config.to_pretty_json()),
        Launch::Publish(config) => {
            // publish prints the Task on stdout; its own logs go to stderr, warnings only.
            service::init_logging("warn", LogFormat::Text, &[], LogTarget::Stderr, Vec::new());
            runtime.block_on(run_publish(&config))
        }
        Launch::Run(config) => {
            let serving = Serving {
                log_level: config.log_level.clone(),
                log_format: config.log_format,
                // Without export, no span is handed to OpenTelemetry: it would cost every
                // task its span bookkeeping for nothing (the proxy makes its trace ids itself).
                export_spans: config.export_spans,
                listen: config.listen,
                log_file: None,
            };
            PROXY.serve(&runtime, &serving, |listener, shutdown| {
                daedalus_proxy::run(listener, config, shutdown)
            })
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
    let spinner = publish::stderr_is_tty() && config.wait && !config.json && !config.follow;
    let follower = std::cell::RefCell::new(Follower::new(publish::stderr_is_tty()));
    let on_event = |event: &daedalus_contract::StreamEvent| {
        follower
            .borrow_mut()
            .show(event, &mut std::io::stdout(), &mut std::io::stderr());
    };
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
    let outcome = publish::publish(config, &request, &trace, progress, on_event).await;
    let follower = follower.into_inner();
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
            } else if follower.printed_text() {
                // The answer is on screen already: end its line, then say how it ended.
                if follower.mid_line() {
                    let _ = writeln!(out);
                }
                let _ = writeln!(out, "task {}  {}", task.id, task.status.state);
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
