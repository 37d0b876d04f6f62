//! The proxy's Prometheus metrics, served at `/metrics` on `PROXY_PORT`.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Every metric of the proxy.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Task messages pulled.
    pub received: Counter,
    /// Results published in a state other than failed.
    pub completed: Counter,
    /// Failed results published (by the runtime, poison bodies, or after the last attempt).
    pub failed: Counter,
    /// Tasks handed back with a delayed nak after a transient failure.
    pub retried: Counter,
    /// Tasks the runtime refused for a spent budget, put back in the stream to wait.
    pub budget_waits: Counter,
    /// Tasks that waited past `BUDGET_WAIT` for their budget and failed.
    pub budget_waits_given_up: Counter,
    /// Bodies without a usable task id sent to the dead-letter subject.
    pub deadlettered: Counter,
    /// Deliveries that were not the first for their message.
    pub redeliveries: Counter,
    /// Tasks whose lease was lost (progress acks unconfirmed for an ack wait).
    pub leases_lost: Counter,
    /// Tasks handed back unfinished (at shutdown, or after the runtime was down past its limit).
    pub handed_back: Counter,
    /// Workers restarted after they died (a panic, or an end other than shutdown).
    pub worker_restarts: Counter,
    /// Tasks the server stopped delivering (max_deliver advisories) that got a failed result here.
    pub given_up_by_server: Counter,
    /// `reply-to` headers refused (outside the allowed prefixes, too long, wildcards).
    pub reply_to_refused: Counter,
    /// Outages of the runtime: it went from up to down (unreachable, or /health not 200).
    pub runtime_outages: Counter,
    /// Task requests that never reached the runtime (connection refused, reset or timed out
    /// before sending); the task is held and sent again, at no cost to its deliveries.
    pub runtime_unreached: Counter,
    /// Times a task in hand was held because the runtime was down.
    pub tasks_held: Counter,
    /// Publishes to a stream (results, dead letters) not acknowledged, and retried.
    pub publish_retries: Counter,
    /// Stream events of a streaming runtime relayed to `agent.events.<agent>.<task-token>`.
    pub events_relayed: Counter,
    /// Times the agent's consumer (or the task stream) was found missing and created again.
    pub consumer_recreated: Counter,
    /// Task messages on the agent's consumer not yet delivered, as of the keeper's last look.
    pub consumer_pending: Gauge,
    /// Tasks being worked on.
    pub in_flight: Gauge,
    /// 1 while the runtime's /health answers 200.
    pub runtime_healthy: Gauge,
    /// Time from pull to ack, for tasks that end in a result.
    pub task_duration: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("daedalus_proxy");
        let m = Self::unregistered();
        m.register_tasks(&mut registry);
        m.register_delivery(&mut registry);
        m.register_runtime(&mut registry);
        Self { registry, ..m }
    }

    /// Every series at zero, in no registry yet.
    fn unregistered() -> Self {
        Self {
            received: Counter::default(),
            completed: Counter::default(),
            failed: Counter::default(),
            retried: Counter::default(),
            budget_waits: Counter::default(),
            budget_waits_given_up: Counter::default(),
            deadlettered: Counter::default(),
            redeliveries: Counter::default(),
            leases_lost: Counter::default(),
            handed_back: Counter::default(),
            worker_restarts: Counter::default(),
            given_up_by_server: Counter::default(),
            reply_to_refused: Counter::default(),
            runtime_outages: Counter::default(),
            runtime_unreached: Counter::default(),
            tasks_held: Counter::default(),
            publish_retries: Counter::default(),
            events_relayed: Counter::default(),
            consumer_recreated: Counter::default(),
            consumer_pending: Gauge::default(),
            in_flight: Gauge::default(),
            runtime_healthy: Gauge::default(),
            task_duration: Histogram::new(exponential_buckets(0.001, 2.0, 20)),
            registry: Registry::default(),
        }
    }

    /// Registers in `registry` the series of the tasks themselves: pulled, ended, retried,
    /// waiting, held, in flight, and how long they took.
    fn register_tasks(&self, registry: &mut Registry) {
        registry.register(
            "tasks_received",
            "Task messages pulled from JetStream",
            self.received.clone(),
        );
        registry.register(
            "tasks_completed",
            "Results published in a state other than failed",
            self.completed.clone(),
        );
        registry.register(
            "tasks_failed",
            "Failed results published",
            self.failed.clone(),
        );
        registry.register(
            "tasks_retried",
            "Tasks handed back with a delayed nak after a transient failure",
            self.retried.clone(),
        );
        registry.register(
            "tasks_budget_waits",
            "Tasks the runtime refused for a spent budget, put back in the stream to wait",
            self.budget_waits.clone(),
        );
        registry.register(
            "tasks_budget_waits_given_up",
            "Tasks that waited past BUDGET_WAIT for their budget and failed",
            self.budget_waits_given_up.clone(),
        );
        registry.register(
            "tasks_deadlettered",
            "Bodies without a usable task id sent to the dead-letter subject",
            self.deadlettered.clone(),
        );
        registry.register(
            "tasks_handed_back",
            "Tasks handed back unfinished (at shutdown, or after the runtime was down past its limit)",
            self.handed_back.clone(),
        );
        registry.register(
            "tasks_given_up_by_server",
            "Tasks the server stopped delivering at max_deliver that got a failed result from its advisory",
            self.given_up_by_server.clone(),
        );
        registry.register(
            "tasks_held",
            "Times a task in hand was held because the runtime was down",
            self.tasks_held.clone(),
        );
        registry.register(
            "tasks_in_flight",
            "Tasks being worked on",
            self.in_flight.clone(),
        );
        registry.register(
            "task_duration_seconds",
            "Time from pull to acknowledged result",
            self.task_duration.clone(),
        );
    }

    /// Registers in `registry` the series of JetStream's delivery: redeliveries, leases,
    /// workers, reply-to, publishes, relayed events and the consumer.
    fn register_delivery(&self, registry: &mut Registry) {
        registry.register(
            "redeliveries",
            "Deliveries that were not a message's first",
            self.redeliveries.clone(),
        );
        registry.register(
            "leases_lost",
            "Tasks abandoned because progress acks went unconfirmed",
            self.leases_lost.clone(),
        );
        registry.register(
            "worker_restarts",
            "Workers restarted after they died",
            self.worker_restarts.clone(),
        );
        registry.register(
            "reply_to_refused",
            "reply-to headers refused and ignored",
            self.reply_to_refused.clone(),
        );
        registry.register(
            "publish_retries",
            "Publishes to a stream (results, dead letters) not acknowledged, and retried",
            self.publish_retries.clone(),
        );
        registry.register(
            "events_relayed",
            "Stream events of a streaming runtime relayed to agent.events.<agent>.<task-token>",
            self.events_relayed.clone(),
        );
        registry.register(
            "consumer_recreated",
            "Times the agent's consumer or the task stream was missing and created again",
            self.consumer_recreated.clone(),
        );
        registry.register(
            "consumer_pending",
            "Task messages on the agent's consumer not yet delivered to any proxy (its num_pending), as of the last look (at start, then every 30 s)",
            self.consumer_pending.clone(),
        );
    }

    /// Registers in `registry` the series of the runtime's health as the proxy sees it.
    fn register_runtime(&self, registry: &mut Registry) {
        registry.register(
            "runtime_outages",
            "Times the runtime went from up to down (unreachable, or /health not 200)",
            self.runtime_outages.clone(),
        );
        registry.register(
            "runtime_unreached",
            "Task requests that never reached the runtime (held and sent again, no delivery spent)",
            self.runtime_unreached.clone(),
        );
        registry.register(
            "runtime_healthy",
            "1 while the runtime's /health answers 200",
            self.runtime_healthy.clone(),
        );
    }

    /// The exposition text.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}
