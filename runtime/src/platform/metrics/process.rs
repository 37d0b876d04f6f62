//! The standard `process_*` families (CPU seconds, memory, open files, start time), read from
//! /proc at each scrape.

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// The standard `process_*` metrics, read from /proc at each scrape (Linux; absent elsewhere).
#[derive(Debug)]
pub(super) struct ProcessCollector;

/// What /proc says about this process.
struct ProcessStats {
    cpu_seconds: f64,
    start_time_seconds: f64,
    virtual_bytes: i64,
    resident_bytes: i64,
    open_fds: i64,
    max_fds: i64,
    threads: i64,
}

fn process_stats() -> Option<ProcessStats> {
    // Linux clock ticks and page size are 100 and 4096 on every platform we ship to.
    const TICKS: f64 = 100.0;
    const PAGE: i64 = 4096;
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let num = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
    let (utime, stime, threads, start_ticks) = (num(11)?, num(12)?, num(17)?, num(19)?);
    let boot_time: f64 = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let mut pages = statm.split_whitespace().map(|p| p.parse::<i64>().ok());
    let (size, resident) = (pages.next()??, pages.next()??);
    let open_fds = std::fs::read_dir("/proc/self/fd")
        .map_or(0, |d| i64::try_from(d.count()).unwrap_or(i64::MAX));
    let max_fds = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|l| {
            l.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0);
    #[expect(clippy::cast_possible_truncation, reason = "thread counts are small")]
    let threads = threads as i64;
    Some(ProcessStats {
        cpu_seconds: (utime + stime) / TICKS,
        start_time_seconds: boot_time + start_ticks / TICKS,
        virtual_bytes: size * PAGE,
        resident_bytes: resident * PAGE,
        open_fds,
        max_fds,
        threads,
    })
}

impl prometheus_client::collector::Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let Some(s) = process_stats() else {
            return Ok(());
        };
        let cpu = ConstCounter::new(s.cpu_seconds);
        cpu.encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds",
            None,
            cpu.metric_type(),
        )?)?;
        let gauges: [(&str, &str, f64); 2] = [
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds",
                s.start_time_seconds,
            ),
            (
                "process_threads",
                "Number of OS threads in the process",
                #[expect(clippy::cast_precision_loss, reason = "thread counts are small")]
                {
                    s.threads as f64
                },
            ),
        ];
        for (name, help, value) in gauges {
            let g = ConstGauge::new(value);
            g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)?;
        }
        for (name, help, value) in [
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                s.virtual_bytes,
            ),
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                s.resident_bytes,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors",
                s.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors",
                s.max_fds,
            ),
        ] {
            let g = ConstGauge::new(value);
            g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)?;
        }
        Ok(())
    }
}
