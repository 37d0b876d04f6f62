//! The runtime's Prometheus metrics, served at `/metrics` on the main port, the registry port
//! and each agent's own port.
//!
//! The `pallas_*` families keep the names, types and labels of the Python runtime's Metrics
//! section, so existing dashboards and alerts keep working; the runtime's own A2A families carry
//! the `daedalus_runtime_` prefix; the standard `process_*` families come from /proc.
//!
//! Loop events feed the LLM and tool families (the loop counts its own events: `LoopEvent::
//! count_in`, below this module); the MCP face records
//! `send_message`; `get_health` and the provider preflight set the health gauges.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

mod exposition;
mod process;
mod stores;

pub use exposition::{CONTENT_TYPE, PROMETHEUS_CONTENT_TYPE, prometheus_text, wants_openmetrics};
use process::ProcessCollector;
use stores::{MemoryCollector, StoreCollector};
pub use stores::{MemoryFigures, StoreFigures};

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct AgentLabel {
    pub agent: String,
}

/// The tokens of one model call, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub reasoning: u64,
}
/// Why an MCP session expired: `handshake` (never finished it) or `idle`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ExpiryLabel {
    pub reason: &'static str,
}

/// Every outcome of a push delivery (`daedalus_runtime_push_deliveries{outcome}`).
pub const PUSH_OUTCOMES: [&str; 6] = [
    "delivered",
    "retried",
    "gave_up",
    "dropped",
    "superseded",
    "owed",
];
/// Every turn limit's setting (`daedalus_runtime_turns_refused{limit}`).
pub const TURN_LIMITS: [&str; 4] = [
    "MAX_CONCURRENT_TASKS",
    "TURN_MEMORY",
    "AGENT_TURN_MEMORY",
    "TURN_MEMORY_SHARE",
];
/// Every cause of a resume (`daedalus_runtime_turns_resumed{cause}`).
pub const RESUME_CAUSES: [&str; 3] = ["restart", "replica_lost", "hand_off"];

/// What came of push deliveries: `delivered`, `retried`, `gave_up`, `dropped`, `superseded`,
/// `owed`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct OutcomeLabel {
    pub outcome: &'static str,
}

/// Why a turn was resumed: `restart` (this replica restarted), `replica_lost` (another
/// replica's lease ran out), `hand_off` (its runtime handed it off at shutdown).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct CauseLabel {
    pub cause: &'static str,
}

/// A budget's scope (`principal`, `tenant`, `agent`) and its name (`other` past the first
/// [`crate::agents::budgets::METRIC_NAMES`] of its kind).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct BudgetLabels {
    pub scope: &'static str,
    pub name: String,
}

/// A budget's scope and name, and one of its limits (`tokens_per_minute`, ...).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct BudgetLimitLabels {
    pub scope: &'static str,
    pub name: String,
    pub limit: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct LimitLabel {
    /// The setting of the limit (`TURN_MEMORY`, ...).
    pub limit: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct AgentInfo {
    pub agent: String,
    pub port: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct AgentOutcome {
    pub agent: String,
    pub outcome: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct AgentModel {
    pub agent: String,
    pub model: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct TokenLabels {
    pub agent: String,
    pub model: String,
    pub kind: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct CompactionLabels {
    pub agent: String,
    pub strategy: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ToolCallLabels {
    pub agent: String,
    pub server: String,
    pub operation: &'static str,
    pub outcome: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ToolOperation {
    pub agent: String,
    pub server: String,
    pub operation: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct DownstreamLabel {
    pub agent: String,
    pub server: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ProviderLabel {
    pub provider: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct StateLabel {
    pub state: String,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// Seconds, for whole agent loops: up to ten minutes.
fn loop_buckets() -> Histogram {
    Histogram::new([
        0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
    ])
}

/// Seconds, for one downstream call: up to its 60 s timeout.
fn call_buckets() -> Histogram {
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    ])
}

/// Every metric of the runtime.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    stores: StoreCollector,
    memory: MemoryCollector,
    pub agent_info: Family<AgentInfo, Gauge>,
    pub send_message: Family<AgentOutcome, Counter>,
    pub send_message_duration: Histograms<AgentLabel>,
    pub llm_turns: Family<AgentModel, Counter>,
    pub llm_tokens: Family<TokenLabels, Counter>,
    pub tool_calls: Family<ToolCallLabels, Counter>,
    pub tool_call_duration: Histograms<ToolOperation>,
    pub downstream_up: Family<DownstreamLabel, Gauge>,
    pub llm_provider_up: Family<ProviderLabel, Gauge>,
    pub agent_health_status: Family<AgentLabel, Gauge<f64, AtomicU64>>,
    /// Contract tasks (`POST /`) by the state they ended in.
    pub tasks: Family<StateLabel, Counter>,
    /// Contract task duration.
    pub task_duration: Histogram,
    /// Live MCP sessions, by agent.
    pub mcp_sessions: Family<AgentLabel, Gauge>,
    /// New MCP sessions refused at the bound (every session had a call in flight).
    pub mcp_sessions_refused: Counter,
    /// Idle MCP sessions ended to make room for a new one.
    pub mcp_sessions_evicted: Counter,
    /// MCP sessions ended by their handshake or idle timeout.
    pub mcp_sessions_expired: Family<ExpiryLabel, Counter>,
    /// Conversations compacted, by agent and the strategy that was carried out.
    pub compactions: Family<CompactionLabels, Counter>,
    /// Push notification deliveries, by outcome.
    pub push_deliveries: Family<OutcomeLabel, Counter>,
    /// Turns refused at a turn limit, by the limit's setting.
    pub turns_refused: Family<LimitLabel, Counter>,
    /// Turns resumed from their record (durable turns), by cause.
    pub turns_resumed: Family<CauseLabel, Counter>,
    /// Steps a resumed turn did not run again (its checkpoint held them).
    pub steps_kept: Counter,
    /// Tokens spent under each budget (`budgets:`), by scope.
    pub budget_tokens: Family<BudgetLabels, Counter>,
    /// Turns and model calls a budget refused, by scope and limit.
    pub budget_refusals: Family<BudgetLimitLabels, Counter>,
    /// What is left in each budget's current window, by scope and limit, as of its last use.
    pub budget_remaining: Family<BudgetLimitLabels, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let up = Gauge::<i64>::default();
        up.set(1);
        registry.register("pallas_up", "1 while the runtime is running", up);
        let m = Self {
            agent_info: Family::default(),
            send_message: Family::default(),
            send_message_duration: Family::new_with_constructor(loop_buckets),
            llm_turns: Family::default(),
            llm_tokens: Family::default(),
            tool_calls: Family::default(),
            tool_call_duration: Family::new_with_constructor(call_buckets),
            downstream_up: Family::default(),
            llm_provider_up: Family::default(),
            agent_health_status: Family::default(),
            tasks: Family::default(),
            task_duration: loop_buckets(),
            mcp_sessions: Family::default(),
            mcp_sessions_refused: Counter::default(),
            mcp_sessions_evicted: Counter::default(),
            mcp_sessions_expired: Family::default(),
            compactions: Family::default(),
            push_deliveries: Family::default(),
            turns_refused: Family::default(),
            turns_resumed: Family::default(),
            steps_kept: Counter::default(),
            budget_tokens: Family::default(),
            budget_refusals: Family::default(),
            budget_remaining: Family::default(),
            registry,
            stores: StoreCollector::default(),
            memory: MemoryCollector::default(),
        };
        let mut m = m;
        m.register_agents();
        m.register_turns();
        m.register_mcp_sessions();
        m.registry.register_collector(Box::new(ProcessCollector));
        m.registry.register_collector(Box::new(m.stores.clone()));
        m.registry.register_collector(Box::new(m.memory.clone()));
        m.register_budgets();
        m.start_at_zero();
        m
    }

    /// Every series of a known label value, at zero from the start: a rate or an alert over
    /// it has data before its first event, and a dashboard shows 0, not "no data".
    fn start_at_zero(&self) {
        for state in daedalus_contract::TaskState::ALL {
            if state.is_terminal() || state.is_interrupted() {
                drop(self.tasks.get_or_create(&StateLabel {
                    state: state.to_string(),
                }));
            }
        }
        for outcome in PUSH_OUTCOMES {
            drop(
                self.push_deliveries
                    .get_or_create(&OutcomeLabel { outcome }),
            );
        }
        for limit in TURN_LIMITS {
            drop(self.turns_refused.get_or_create(&LimitLabel { limit }));
        }
        for cause in RESUME_CAUSES {
            drop(self.turns_resumed.get_or_create(&CauseLabel { cause }));
        }
        for reason in ["handshake", "idle"] {
            drop(
                self.mcp_sessions_expired
                    .get_or_create(&ExpiryLabel { reason }),
            );
        }
    }

    /// Reports what the task store holds in memory (`daedalus_runtime_tasks_in_memory*`).
    pub fn watch_tasks(&self, figures: impl MemoryFigures + 'static) {
        self.memory.watch(Box::new(figures));
    }

    /// Reports what store `name`'s writer has done (`daedalus_runtime_store_*{store}`).
    pub fn watch_store(&self, name: &'static str, figures: impl StoreFigures + 'static) {
        self.stores.watch(name, Box::new(figures));
    }

    /// The agents' own: their info, MCP `send_message` calls, model round-trips and tokens,
    /// downstream tool calls, and the health of their MCP servers and model providers.
    fn register_agents(&mut self) {
        let r = &mut self.registry;
        r.register(
            "pallas_agent_info",
            "1 per configured agent",
            self.agent_info.clone(),
        );
        r.register(
            "pallas_send_message",
            "send_message MCP calls, by outcome (ok/error)",
            self.send_message.clone(),
        );
        r.register(
            "pallas_send_message_duration_seconds",
            "End-to-end MCP send_message wall-clock duration",
            self.send_message_duration.clone(),
        );
        r.register(
            "pallas_llm_turns",
            "LLM provider round-trips per agent and model",
            self.llm_turns.clone(),
        );
        r.register(
            "pallas_llm_tokens",
            "Tokens consumed, by kind (input/output/cache_read/cache_write/reasoning)",
            self.llm_tokens.clone(),
        );
        r.register(
            "pallas_tool_calls",
            "Downstream MCP operations, by outcome (ok/error)",
            self.tool_calls.clone(),
        );
        r.register(
            "pallas_tool_call_duration_seconds",
            "Downstream MCP operation duration",
            self.tool_call_duration.clone(),
        );
        r.register(
            "pallas_downstream_up",
            "1 when the downstream MCP server passed the last get_health probe",
            self.downstream_up.clone(),
        );
        r.register(
            "pallas_llm_provider_up",
            "1 when the LLM provider passed its last preflight or re-probe",
            self.llm_provider_up.clone(),
        );
        r.register(
            "pallas_agent_health_status",
            "Aggregate of the last get_health: 1=ok, 0.5=degraded, 0=error",
            self.agent_health_status.clone(),
        );
    }

    /// The turns': tasks by end state and duration, compactions, push deliveries, turns refused
    /// at a limit, and turns resumed with the steps their checkpoints kept.
    fn register_turns(&mut self) {
        let r = &mut self.registry;
        r.register(
            "daedalus_runtime_tasks",
            "Contract tasks (POST /) by final state",
            self.tasks.clone(),
        );
        r.register(
            "daedalus_runtime_task_duration_seconds",
            "Contract task duration (POST /)",
            self.task_duration.clone(),
        );
        r.register(
            "daedalus_runtime_compactions",
            "Conversations compacted to fit the model's budget, by agent and strategy (a summary that failed counts as truncate)",
            self.compactions.clone(),
        );
        r.register(
            "daedalus_runtime_push_deliveries",
            "Push notifications: states delivered to webhooks, tries that failed and were made again (retried), deliveries given up, states held by a later one of their task (superseded), states that waited as a marker and went as their task stood (owed), and states dropped because not even a marker fitted",
            self.push_deliveries.clone(),
        );
        r.register(
            "daedalus_runtime_turns_refused",
            "Turns refused at once (503, Retry-After) because a turn limit had no room, by the limit's setting",
            self.turns_refused.clone(),
        );
        r.register(
            "daedalus_runtime_turns_resumed",
            "Turns resumed from their last checkpoint after their runtime stopped, by cause (restart, replica_lost, hand_off)",
            self.turns_resumed.clone(),
        );
        r.register(
            "daedalus_runtime_resumed_steps_kept",
            "Steps (model answers with their tool results) resumed turns did not run again: their checkpoints held them",
            self.steps_kept.clone(),
        );
    }

    /// The MCP face's sessions: live, refused, evicted, expired.
    fn register_mcp_sessions(&mut self) {
        let r = &mut self.registry;
        r.register(
            "daedalus_runtime_mcp_sessions",
            "Live MCP sessions, by agent",
            self.mcp_sessions.clone(),
        );
        r.register(
            "daedalus_runtime_mcp_sessions_refused",
            "New MCP sessions refused at MAX_MCP_SESSIONS (every session had a call in flight)",
            self.mcp_sessions_refused.clone(),
        );
        r.register(
            "daedalus_runtime_mcp_sessions_evicted",
            "Idle MCP sessions ended to make room for a new one",
            self.mcp_sessions_evicted.clone(),
        );
        r.register(
            "daedalus_runtime_mcp_sessions_expired",
            "MCP sessions ended by MCP_HANDSHAKE_TIMEOUT (reason=handshake) or MCP_SESSION_IDLE (reason=idle)",
            self.mcp_sessions_expired.clone(),
        );
    }

    /// Registers the budgets' series (`budgets:`).
    fn register_budgets(&mut self) {
        let r = &mut self.registry;
        r.register(
            "daedalus_runtime_budget_tokens",
            "Tokens spent under each budget (budgets:), by scope (principal, tenant, agent) and name (other past the first 100 names of a scope)",
            self.budget_tokens.clone(),
        );
        r.register(
            "daedalus_runtime_budget_refusals",
            "Turns and model calls a budget refused, by scope, name and limit",
            self.budget_refusals.clone(),
        );
        r.register(
            "daedalus_runtime_budget_remaining",
            "What is left in a budget's current window (tokens or turns), by scope, name and limit, as of its last use",
            self.budget_remaining.clone(),
        );
    }

    /// Counts one model call of `agent` on `model` and its tokens.
    pub fn llm_turn(&self, agent: &str, model: &str, tokens: &Tokens) {
        let labels = AgentModel {
            agent: agent.to_owned(),
            model: model.to_owned(),
        };
        self.llm_turns.get_or_create(&labels).inc();
        self.tokens(agent, model, tokens);
    }

    /// Counts one compaction of `agent`'s conversation by `strategy`, and the tokens of its
    /// summary's model call, if it made one.
    pub fn compaction(
        &self,
        agent: &str,
        model: &str,
        strategy: &'static str,
        summary: Option<&Tokens>,
    ) {
        self.compactions
            .get_or_create(&CompactionLabels {
                agent: agent.to_owned(),
                strategy,
            })
            .inc();
        if let Some(tokens) = summary {
            self.tokens(agent, model, tokens);
        }
    }

    /// Counts the tokens of one model call.
    fn tokens(&self, agent: &str, model: &str, tokens: &Tokens) {
        for (kind, n) in [
            ("input", tokens.input),
            ("output", tokens.output),
            ("cache_read", tokens.cache_read),
            ("cache_write", tokens.cache_write),
            ("reasoning", tokens.reasoning),
        ] {
            if n > 0 {
                self.llm_tokens
                    .get_or_create(&TokenLabels {
                        agent: agent.to_owned(),
                        model: model.to_owned(),
                        kind,
                    })
                    .inc_by(n);
            }
        }
    }

    /// Counts one tool call of `agent` on `server`: `ok` or `error`, and how long it took.
    pub fn tool_call(&self, agent: &str, server: &str, outcome: &'static str, elapsed_ms: u64) {
        self.tool_calls
            .get_or_create(&ToolCallLabels {
                agent: agent.to_owned(),
                server: server.to_owned(),
                operation: "tool",
                outcome,
            })
            .inc();
        #[expect(clippy::cast_precision_loss, reason = "milliseconds to seconds")]
        let seconds = elapsed_ms as f64 / 1000.0;
        self.tool_call_duration
            .get_or_create(&ToolOperation {
                agent: agent.to_owned(),
                server: server.to_owned(),
                operation: "tool",
            })
            .observe(seconds);
    }

    /// The exposition for a scraper that sent `accept`, and its content type: OpenMetrics
    /// when asked for, else the Prometheus text format 0.0.4 (as Pallas serves it).
    pub fn render_for(&self, accept: Option<&str>) -> (&'static str, String) {
        let openmetrics = self.render();
        if wants_openmetrics(accept) {
            (CONTENT_TYPE, openmetrics)
        } else {
            (PROMETHEUS_CONTENT_TYPE, prometheus_text(&openmetrics))
        }
    }

    /// The exposition text (OpenMetrics).
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(8 * 1024);
        if let Err(e) = encode(&mut out, &self.registry) {
            tracing::error!(error = %e, "cannot encode the metrics");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::agent_loop::LoopEvent;
    use crate::agents::llm::Usage;

    #[test]
    fn loop_events_count_turns_tokens_and_tool_calls() {
        let m = Metrics::new();
        LoopEvent::LlmTurnFinished {
            agent: "a".into(),
            depth: 0,
            step: 1,
            model: "gpt".into(),
            usage: Usage {
                input_tokens: 10,
                output_tokens: 3,
                cache_read_tokens: 0,
                cache_write_tokens: 0,
                reasoning_tokens: 2,
            },
            tool_calls: 1,
        }
        .count_in(&m);
        LoopEvent::ToolFailed {
            agent: "a".into(),
            depth: 0,
            step: 1,
            server: "s".into(),
            tool: "t".into(),
            call_id: "c".into(),
            reason: "no".into(),
            elapsed_ms: 1500,
        }
        .count_in(&m);
        let text = m.render();
        for line in [
            "pallas_up 1",
            "pallas_llm_turns_total{agent=\"a\",model=\"gpt\"} 1",
            "pallas_llm_tokens_total{agent=\"a\",model=\"gpt\",kind=\"input\"} 10",
            "pallas_llm_tokens_total{agent=\"a\",model=\"gpt\",kind=\"output\"} 3",
            "pallas_llm_tokens_total{agent=\"a\",model=\"gpt\",kind=\"reasoning\"} 2",
            "pallas_tool_calls_total{agent=\"a\",server=\"s\",operation=\"tool\",outcome=\"error\"} 1",
            "pallas_tool_call_duration_seconds_sum{agent=\"a\",server=\"s\",operation=\"tool\"} 1.5",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        assert!(
            !text.contains("kind=\"cache_read\""),
            "zero kinds are not invented: {text}"
        );
    }

    #[test]
    fn process_metrics_come_from_proc() {
        let text = Metrics::new().render();
        let rss = text
            .lines()
            .find_map(|l| l.strip_prefix("process_resident_memory_bytes "))
            .and_then(|v| v.parse::<f64>().ok())
            .expect("process_resident_memory_bytes");
        assert!(rss > 1_000_000.0, "{rss}");
        assert!(text.contains("process_cpu_seconds_total "), "{text}");
    }

    #[test]
    fn scrapers_get_prometheus_text_unless_they_ask_for_openmetrics() {
        let m = Metrics::new();
        m.llm_turns
            .get_or_create(&AgentModel {
                agent: "a".into(),
                model: "gpt".into(),
            })
            .inc();
        let prometheus_accept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        let (kind, text) = m.render_for(Some(prometheus_accept));
        assert_eq!(kind, CONTENT_TYPE);
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert!(text.contains("# TYPE pallas_llm_turns counter"), "{text}");

        for accept in [
            None,
            Some("text/plain"),
            Some("*/*"),
            Some("application/openmetrics-text;q=0"),
        ] {
            let (kind, text) = m.render_for(accept);
            assert_eq!(kind, PROMETHEUS_CONTENT_TYPE, "{accept:?}");
            assert!(!text.contains("# EOF"), "{text}");
            assert!(!text.contains("# UNIT"), "{text}");
            assert!(
                text.contains("# TYPE pallas_llm_turns_total counter"),
                "{text}"
            );
            assert!(text.contains("# HELP pallas_llm_turns_total "), "{text}");
            assert!(
                text.contains("pallas_llm_turns_total{agent=\"a\",model=\"gpt\"} 1"),
                "{text}"
            );
            // Gauges and histograms keep their names.
            assert!(text.contains("# TYPE pallas_up gauge"), "{text}");
        }
    }
}
