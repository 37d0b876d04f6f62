//! `daedalus-runtime`: parse the configuration, set up logging, serve until a signal (and read
//! the configuration again on SIGHUP).

use std::process::ExitCode;

use daedalus_contract::service::{self, LogTarget};
use daedalus_runtime::config::{ConfigError, Launch};
use daedalus_runtime::{reload, run_reloading, telemetry};

fn main() -> ExitCode {
    return_large_buffers_to_the_os();
    let cwd = std::env::current_dir().unwrap_or_else(|_| std::path::PathBuf::from("."));
    let config = match read_config(&cwd) {
        Ok(Launch::Run(config)) => config,
        Ok(Launch::Healthcheck(addr)) => return healthcheck(addr),
        Ok(Launch::CheckConfig(config)) => {
            #[expect(clippy::print_stdout, reason = "--check-config prints to stdout")]
            {
                println!("{}", config.to_pretty_json());
            }
            return ExitCode::SUCCESS;
        }
        Err(ConfigError::Cli(e)) => e.exit(),
        Err(e) => {
            eprintln!("daedalus-runtime: configuration error: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("daedalus-runtime: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The gRPC trace exporter starts its connection on the runtime.
    let entered = runtime.enter();
    let (telemetry, trace_layer) = match telemetry::init("daedalus-runtime", "daedalus_runtime") {
        Ok(t) => t,
        Err(e) => {
            let cause = std::error::Error::source(&e).map(ToString::to_string);
            eprintln!("daedalus-runtime: {e}: {}", cause.unwrap_or_default());
            return ExitCode::from(2);
        }
    };
    service::init_logging(
        &config.log_level,
        config.log_format,
        &["daedalus_runtime", "daedalus_contract"],
        LogTarget::Stdout,
        vec![trace_layer],
    );
    drop(entered);

    let code = runtime.block_on(async {
        let reloads = reload::Reloader::on_hangup(move |serving| {
            let args: Vec<_> = std::env::args_os().collect();
            Launch::reread(args, &|k| std::env::var(k).ok(), &cwd, serving)
        });
        let listener = match tokio::net::TcpListener::bind(config.listen).await {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(addr = %config.listen, error = %e, "cannot bind");
                return ExitCode::FAILURE;
            }
        };
        match run_reloading(listener, config, service::shutdown_signal(), reloads).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                let cause = std::error::Error::source(&e).map(ToString::to_string);
                tracing::error!(error = %e, cause, "runtime failed");
                ExitCode::FAILURE
            }
        }
    });
    telemetry.shutdown();
    code
}

/// `daedalus-runtime healthcheck`: 0 when `/health` answers 200, else 1 with the reason.
fn healthcheck(addr: std::net::SocketAddr) -> ExitCode {
    match daedalus_contract::healthcheck::probe(addr, daedalus_contract::container::HEALTH_PATH) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("daedalus-runtime healthcheck: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The configuration from the command line, the environment and the files they name.
fn read_config(cwd: &std::path::Path) -> Result<Launch, ConfigError> {
    Launch::from_sources(std::env::args_os(), &|k| std::env::var(k).ok(), cwd)
}

/// glibc serves allocations over its mmap threshold with `mmap`, and gives them back to the OS
/// when freed; but after the first such free it raises the threshold (up to 32 MiB), and from
/// then on multi-MiB request bodies and answers land in per-thread arenas that keep the memory.
/// Sixty 8 MiB tasks then leave the process at about twice the task memory it is allowed.
/// A fixed threshold of 1 MiB keeps large buffers mmapped: freed, they leave the process.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn return_large_buffers_to_the_os() {
    const LARGE: libc::c_int = 1 << 20;
    #[expect(
        unsafe_code,
        reason = "mallopt is glibc's documented tuning call, made before any other thread starts"
    )]
    // SAFETY: mallopt only sets an allocator parameter; called first thing in main.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, LARGE);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn return_large_buffers_to_the_os() {}
