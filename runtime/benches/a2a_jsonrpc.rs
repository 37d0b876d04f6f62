//! JSON-RPC `SendMessage` against the official A2A Python SDK (a2a-sdk 1.3.0 on uvicorn, its
//! echo agent, `test-kit/py/a2a_echo_agent.py`) and against our runtime on the `passthrough`
//! model (the binary, as a process of its own like the SDK's server, with `SESSIONS_DB=off`: the
//! SDK's agent keeps no conversation either), with one load tool and one
//! request shape, in one run, at 1 and 16 requests in flight: requests per second and the
//! round trip's p50 and p99. Targets: at least 50× the SDK's requests per second, and at most
//! 1/50 of its p99.
//!
//! One more row measures the shared task store: our runtime with `TASKS_DB` on a NATS KV
//! bucket (every task stored by compare-and-set when it begins and when it ends), with a
//! second replica on the same bucket mirroring every write, the load on the first.
//!
//! And one measures authentication: our runtime checking an RS256 bearer token of a real OpenID
//! provider (the test kit's) on every request (`AUTH_ISSUER`, keys cached), against the same
//! runtime with authentication off.
//!
//! Run: `cargo bench -p daedalus-runtime --bench a2a_jsonrpc` (needs `.venv-a2a`: `.ci/setup`).

#![allow(clippy::print_stdout, reason = "a benchmark prints its table")]

#[path = "support/load.rs"]
mod load;

use daedalus_test_kit::{EchoAgent, NatsServer, OidcProvider, RuntimeProcess};
use load::Figures;

/// The SDK's echo agent keeps its tasks in memory and no conversation; ours keeps its tasks in
/// memory too (`TASKS_DB=memory`; the default is a SQLite file, measured by the
/// `durable_turns` bench) and, like it, no conversation store.
const SESSIONS_DB: &str = "off";

/// Requests per concurrency level and server, after a warm-up.
const REQUESTS: usize = 1_600;
const WARM_UP: usize = 200;

/// `REQUESTS` requests to `url`, `in_flight` at a time, presenting `bearer` if given.
async fn load(url: &str, in_flight: usize, bearer: Option<&str>) -> Figures {
    load::jsonrpc(url, in_flight, bearer, WARM_UP, REQUESTS).await
}

fn main() {
    let rt = tokio::runtime::Runtime::new().expect("a tokio runtime");
    rt.block_on(async {
        let sdk = EchoAgent::start();
        let ours = RuntimeProcess::start_with(
            "bench",
            &[("SESSIONS_DB", SESSIONS_DB), ("TASKS_DB", "memory")],
        )
        .await;
        let ours_url = format!("{}/", ours.url());
        let nats = NatsServer::start();
        let tasks_db = format!("{}/bench-tasks", nats.url());
        let shared = |replica: &'static str| {
            let tasks_db = tasks_db.clone();
            async move {
                RuntimeProcess::start_with(
                    "bench",
                    &[
                        ("SESSIONS_DB", SESSIONS_DB),
                        ("TASKS_DB", &tasks_db),
                        ("REPLICA_ID", replica),
                    ],
                )
                .await
            }
        };
        let (kv, _mirror) = (shared("bench-a").await, shared("bench-b").await);
        let kv_url = format!("{}/", kv.url());
        let provider = OidcProvider::start();
        let guarded = RuntimeProcess::start_with(
            "bench",
            &[
                ("SESSIONS_DB", SESSIONS_DB),
                ("TASKS_DB", "memory"),
                ("AUTH_ISSUER", provider.issuer()),
                ("AUTH_AUDIENCE", daedalus_test_kit::AUDIENCE),
            ],
        )
        .await;
        let guarded_url = format!("{}/", guarded.url());
        let token = provider.token_for("bench").await;
        println!(
            "\nJSON-RPC SendMessage, {REQUESTS} requests per row after {WARM_UP} to warm up\n"
        );
        println!("| in flight | server | requests/s | p50 | p99 |");
        println!("|---|---|---|---|---|");
        let mut verdicts = Vec::new();
        for in_flight in [1, 16] {
            let baseline = load(&sdk.jsonrpc_url(), in_flight, None).await;
            let ours = load(&ours_url, in_flight, None).await;
            let on_kv = load(&kv_url, in_flight, None).await;
            let with_token = load(&guarded_url, in_flight, Some(&token)).await;
            for (name, f) in [
                ("a2a-sdk 1.3.0 (uvicorn)", &baseline),
                ("daedalus-runtime", &ours),
                ("daedalus-runtime, TASKS_DB=nats (2 replicas)", &on_kv),
                (
                    "daedalus-runtime, RS256 bearer checked (AUTH_ISSUER)",
                    &with_token,
                ),
            ] {
                println!(
                    "| {in_flight} | {name} | {:.0} | {:.3} ms | {:.3} ms |",
                    f.rate, f.p50_ms, f.p99_ms
                );
            }
            let rate = ours.rate / baseline.rate;
            let p99 = baseline.p99_ms / ours.p99_ms;
            verdicts.push(format!(
                "at {in_flight} in flight: {rate:.0}× the requests per second (target 50×: {}), \
                 p99 1/{p99:.0} of the SDK's (target 1/50: {})",
                if rate >= 50.0 { "met" } else { "NOT met" },
                if p99 >= 50.0 { "met" } else { "NOT met" },
            ));
        }
        println!();
        for verdict in verdicts {
            println!("{verdict}");
        }
    });
}
