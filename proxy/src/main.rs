//! `daedalus-proxy`: parse the configuration, set up logging, run the sidecar (or `publish`).

use std::process::ExitCode;

use daedalus_contract::launch::{Binary, Serving};
use daedalus_contract::service::{self, LogTarget};
use daedalus_proxy::config::{ConfigError, Launch, LogFormat};
use daedalus_proxy::publish;

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
            runtime.block_on(publish::run(&config))
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
