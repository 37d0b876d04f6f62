//! What the stores' writers have done, read from them at each scrape: commits, checkpoints and
//! the size of each write-ahead log (`daedalus_runtime_store_*{store}`); and what the task
//! store holds in memory (`daedalus_runtime_tasks_in_memory`, `..._bytes`).

use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// What a store's writer tells the metrics (the stores implement it; this layer names none).
pub trait StoreFigures: Send + Sync + std::fmt::Debug {
    /// Transactions committed so far.
    fn commits(&self) -> u64;
    /// WAL checkpoints run so far.
    fn checkpoints(&self) -> u64;
    /// The write-ahead log's size now, in bytes.
    fn wal_bytes(&self) -> u64;
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StoreLabel {
    store: &'static str,
}

/// A store watched: its name, and what its writer tells.
type Watched = (&'static str, Box<dyn StoreFigures>);

/// A figure of a store: its metric's name, help, and how it is read.
type Figure = (&'static str, &'static str, fn(&dyn StoreFigures) -> u64);

/// The stores watched, by name.
#[derive(Debug, Default, Clone)]
pub(super) struct StoreCollector(Arc<Mutex<Vec<Watched>>>);

impl StoreCollector {
    /// Reports `figures` as store `name` from now on (a name watched again is replaced).
    pub(super) fn watch(&self, name: &'static str, figures: Box<dyn StoreFigures>) {
        let mut stores = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        stores.retain(|(kept, _)| *kept != name);
        stores.push((name, figures));
    }
}

impl prometheus_client::collector::Collector for StoreCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let stores = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if stores.is_empty() {
            return Ok(());
        }
        let counters: [Figure; 2] = [
            (
                "daedalus_runtime_store_commits",
                "Transactions the store's writer committed (a turn on the default store makes one)",
                |f| f.commits(),
            ),
            (
                "daedalus_runtime_store_checkpoints",
                "WAL checkpoints run on the store's file",
                |f| f.checkpoints(),
            ),
        ];
        for (name, help, read) in counters {
            let mut family = encoder.encode_descriptor(
                name,
                help,
                None,
                prometheus_client::metrics::MetricType::Counter,
            )?;
            for (store, figures) in stores.iter() {
                let counter = ConstCounter::new(read(figures.as_ref()));
                counter.encode(family.encode_family(&StoreLabel { store })?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "daedalus_runtime_store_wal_bytes",
            "The size of the store's write-ahead log now (bounded: see docs/durable-turns.md)",
            None,
            prometheus_client::metrics::MetricType::Gauge,
        )?;
        for (store, figures) in stores.iter() {
            let bytes = i64::try_from(figures.wal_bytes()).unwrap_or(i64::MAX);
            ConstGauge::new(bytes).encode(family.encode_family(&StoreLabel { store })?)?;
        }
        Ok(())
    }
}

/// What the task store holds in memory (it implements it; this layer names no store type).
pub trait MemoryFigures: Send + Sync + std::fmt::Debug {
    /// Tasks held.
    fn tasks(&self) -> u64;
    /// Bytes they hold, as last taken.
    fn bytes(&self) -> u64;
}

/// The task store watched, once startup made it.
#[derive(Debug, Default, Clone)]
pub(super) struct MemoryCollector(Arc<Mutex<Option<Box<dyn MemoryFigures>>>>);

impl MemoryCollector {
    pub(super) fn watch(&self, figures: Box<dyn MemoryFigures>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(figures);
    }
}

impl prometheus_client::collector::Collector for MemoryCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let held = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(figures) = held.as_ref() else {
            return Ok(());
        };
        let gauges: [(&str, &str, u64); 2] = [
            (
                "daedalus_runtime_tasks_in_memory",
                "Tasks the task store holds in memory (running ones, and those read or written since the start, up to TASK_MEMORY)",
                figures.tasks(),
            ),
            (
                "daedalus_runtime_tasks_in_memory_bytes",
                "Bytes the tasks held in memory take (bounded by TASK_MEMORY)",
                figures.bytes(),
            ),
        ];
        for (name, help, value) in gauges {
            let gauge = ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX));
            let family = encoder.encode_descriptor(
                name,
                help,
                None,
                prometheus_client::metrics::MetricType::Gauge,
            )?;
            gauge.encode(family)?;
        }
        Ok(())
    }
}
