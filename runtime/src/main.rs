//! `daedalus-runtime`: parse the configuration, set up logging, serve until a signal (and read
//! the configuration again on SIGHUP).

use std::process::ExitCode;

use daedalus_contract::container::HEALTH_PATH;
use daedalus_contract::launch::{Binary, Serving};
use daedalus_runtime::config::{ConfigError, Launch};
use daedalus_runtime::lifecycle::reload;
use daedalus_runtime::run_reloading;

const RUNTIME: Binary = Binary {
    name: "daedalus-runtime",
    crate_name: "daedalus_runtime",
    log_crates: &["daedalus_runtime", "daedalus_contract"],
};

fn main() -> ExitCode {
    return_large_buffers_to_the_os();
    raise_the_open_file_limit();
    let cwd = std::env::current_dir().unwrap_or_else(|_| std::path::PathBuf::from("."));
    let args = || std::env::args_os();
    let config = match Launch::from_sources(args(), &|k| std::env::var(k).ok(), &cwd) {
        Ok(Launch::Run(config)) => config,
        Ok(Launch::Healthcheck(addr)) => return RUNTIME.healthcheck(addr, HEALTH_PATH),
        Ok(Launch::CheckConfig(config)) => return RUNTIME.print_config(&config.to_pretty_json()),
        Ok(Launch::MigrateModule(module)) => return migrate_module(&module),
        Err(ConfigError::Cli(e)) => e.exit(),
        Err(e) => return RUNTIME.config_error(&e),
    };
    let runtime = match RUNTIME.async_runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let serving = Serving {
        log_level: config.log_level.clone(),
        log_format: config.log_format,
        export_spans: true,
        listen: config.listen,
        log_file: config.log_file.clone(),
    };
    RUNTIME.serve(&runtime, &serving, |listener, shutdown| {
        // SIGHUP reads the configuration again, from the same sources.
        let reloads = reload::Reloader::on_hangup(move |serving| {
            Launch::reread(
                args().collect::<Vec<_>>(),
                &|k| std::env::var(k).ok(),
                &cwd,
                serving,
            )
        });
        run_reloading(listener, config, shutdown, reloads)
    })
}

/// `migrate-module`: the YAML on stdout, what to review on stderr; exit 2 when the module
/// cannot be read.
fn migrate_module(module: &std::path::Path) -> ExitCode {
    use std::io::Write as _;
    let source = match std::fs::read_to_string(module) {
        Ok(source) => source,
        Err(e) => {
            return RUNTIME.config_error(&format!("cannot read {}: {e}", module.display()));
        }
    };
    let migration =
        daedalus_runtime::agents::migrate::migrate(&source, &module.display().to_string());
    let mut err = std::io::stderr().lock();
    for note in &migration.notes {
        let _ = writeln!(err, "review: {note}");
    }
    let _ = std::io::stdout()
        .lock()
        .write_all(migration.yaml.as_bytes());
    ExitCode::SUCCESS
}

/// glibc serves allocations over its mmap threshold with `mmap`, and gives them back to the OS
/// when freed; but after the first such free it raises the threshold (up to 32 MiB), and from
/// then on multi-MiB request bodies and answers land in per-thread arenas that keep the memory.
/// Sixty 8 MiB tasks then leave the process at about twice the task memory it is allowed.
/// A fixed threshold of 1 MiB keeps large buffers mmapped: freed, they leave the process.
///
/// Fixing the threshold also fixes the trim threshold at its 128 KiB default: every time the
/// top of the heap had that much free, glibc gave it back, and the next requests faulted the
/// pages in again (cleared by the kernel): 18% fewer requests per second under load, in
/// `perf`'s `clear_page_erms` under `sysmalloc`. Up to [`KEPT_FREE`] of free heap top is kept
/// instead (and grown by [`TOP_PAD`] at a time): small against the task memory, and it never
/// holds the large buffers, which stay mmapped.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn return_large_buffers_to_the_os() {
    const LARGE: libc::c_int = 1 << 20;
    const KEPT_FREE: libc::c_int = 16 << 20;
    const TOP_PAD: libc::c_int = 4 << 20;
    #[expect(
        unsafe_code,
        reason = "mallopt is glibc's documented tuning call, made before any other thread starts"
    )]
    // SAFETY: mallopt only sets an allocator parameter; called first thing in main.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, LARGE);
        libc::mallopt(libc::M_TRIM_THRESHOLD, KEPT_FREE);
        libc::mallopt(libc::M_TOP_PAD, TOP_PAD);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn return_large_buffers_to_the_os() {}

/// Raises the soft limit on open files to the hard one, as Go's runtime does: every held
/// connection is a file, and `MAX_CONNECTIONS` (20,000 by default) is far above the 1,024 soft
/// limit many shells and init systems start a process with.
#[cfg(target_os = "linux")]
fn raise_the_open_file_limit() {
    #[expect(
        unsafe_code,
        reason = "getrlimit and setrlimit are the documented calls, given a valid struct"
    )]
    // SAFETY: both calls only read or write the `rlimit` struct we own.
    unsafe {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) == 0
            && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &raw const limit);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn raise_the_open_file_limit() {}
