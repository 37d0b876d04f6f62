//! gRPC `SendMessage` against the official A2A Python SDK's gRPC server (a2a-sdk 1.3.0,
//! `GrpcHandler` on `grpc.aio`, its echo agent: `test-kit/py/a2a_echo_agent.py`) and against our
//! runtime on the `passthrough` model (the binary, as a process of its own, `SESSIONS_DB=off`,
//! `TASKS_DB=memory`),
//! and our own JSON-RPC `SendMessage` on the same process: one load tool, one request (a new
//! task with one text part, answered when it is complete), at 1 and 16 requests in flight;
//! requests per second, the round trip's p50 and p99, and the server's CPU time per request
//! (the load tool shares the machine's cores with the server, so the rate also pays for the
//! client; the CPU time is the server's alone).
//!
//! Each gRPC load runs over one HTTP/2 connection (a tonic channel, as a gRPC client does), its
//! calls multiplexed; the JSON-RPC load over a pool of as many HTTP/1.1 connections as calls
//! in flight.
//!
//! Run: `cargo bench -p daedalus-runtime --bench a2a_grpc` (needs `.venv-a2a`: `.ci/setup`).

#![allow(clippy::print_stdout, reason = "a benchmark prints its table")]

#[path = "support/load.rs"]
mod load;

use daedalus_contract::grpc::v1;
use daedalus_contract::grpc::v1::a2a_service_client::A2aServiceClient;
use daedalus_test_kit::{EchoAgent, RuntimeProcess};
use load::Figures;
use tonic::transport::Channel;

/// The CPU time process `pid` has used so far, in seconds: `utime` + `stime` of
/// `/proc/<pid>/stat`, in Linux's clock ticks of 1/100 s.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name (which may hold spaces) in its parentheses.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |at: usize| {
        fields
            .get(at)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    (ticks(11) + ticks(12)) / 100.0
}

/// A load's figures and the server's CPU time per request, in microseconds.
async fn measured(pid: u32, load: impl std::future::Future<Output = Figures>) -> (Figures, f64) {
    let before = cpu_seconds(pid);
    let figures = load.await;
    #[expect(clippy::cast_precision_loss, reason = "a figure for people")]
    let per_request = (cpu_seconds(pid) - before) / (REQUESTS + WARM_UP) as f64 * 1e6;
    (figures, per_request)
}

/// Requests per concurrency level and server, after a warm-up.
const REQUESTS: usize = 1_600;
const WARM_UP: usize = 200;

/// gRPC `SendMessage` number `i`: a new task with one text part.
fn send_message(i: usize) -> tonic::Request<v1::SendMessageRequest> {
    let mut request =
        tonic::Request::new(v1::SendMessageRequest::text(&format!("bench-{i}"), "hello"));
    request.metadata_mut().insert(
        "a2a-version",
        tonic::metadata::MetadataValue::from_static("1.0"),
    );
    request
}

/// Sends call `i` and checks the task completed.
async fn call(client: &A2aServiceClient<Channel>, i: usize) {
    let answer = client
        .clone()
        .send_message(send_message(i))
        .await
        .expect("answered")
        .into_inner();
    let Some(v1::send_message_response::Payload::Task(task)) = answer.payload else {
        panic!("a task: {answer:?}");
    };
    let state = task.status.as_ref().map(v1::TaskStatus::state);
    assert_eq!(state, Some(v1::TaskState::Completed), "{task:?}");
}

/// `REQUESTS` gRPC calls to `url`, `in_flight` at a time over `connections` HTTP/2
/// connections (call `i` on connection `i % connections`).
async fn grpc_load(url: &str, in_flight: usize, connections: usize) -> Figures {
    let mut clients = Vec::new();
    for _ in 0..connections {
        let channel = Channel::from_shared(url.to_owned())
            .expect("a URL")
            .connect()
            .await
            .expect("connects");
        clients.push(A2aServiceClient::new(channel));
    }
    for i in 0..WARM_UP {
        call(&clients[i % connections], i).await;
    }
    load::run(in_flight, WARM_UP..WARM_UP + REQUESTS, |i| {
        call(&clients[i % connections], i)
    })
    .await
}

/// `REQUESTS` JSON-RPC requests to `url`, `in_flight` at a time.
async fn jsonrpc_load(url: &str, in_flight: usize) -> Figures {
    load::jsonrpc(url, in_flight, None, WARM_UP, REQUESTS).await
}

fn main() {
    let rt = tokio::runtime::Runtime::new().expect("a tokio runtime");
    rt.block_on(async {
        let sdk = EchoAgent::start_with_grpc();
        let sdk_grpc = sdk.grpc_url().expect("the SDK serves gRPC");
        let ours = RuntimeProcess::start_with(
            "bench",
            &[("SESSIONS_DB", "off"), ("TASKS_DB", "memory")],
        )
        .await;
        let pid = ours.pid().expect("the runtime runs");
        println!("\nSendMessage, {REQUESTS} requests per row after {WARM_UP} to warm up\n");
        println!(
            "| in flight | server | binding | requests/s | p50 | p99 | server CPU per request |"
        );
        println!("|---|---|---|---|---|---|---|");
        let mut verdicts = Vec::new();
        for in_flight in [1, 16] {
            let (baseline, sdk_cpu) = measured(sdk.pid(), grpc_load(&sdk_grpc, in_flight, 1)).await;
            let (grpc, grpc_cpu) = measured(pid, grpc_load(&ours.url(), in_flight, 1)).await;
            let (spread, spread_cpu) =
                measured(pid, grpc_load(&ours.url(), in_flight, in_flight)).await;
            let (jsonrpc, jsonrpc_cpu) =
                measured(pid, jsonrpc_load(&format!("{}/", ours.url()), in_flight)).await;
            let rows = [
                ("a2a-sdk 1.3.0 (grpc.aio)", "gRPC, 1 connection", &baseline, sdk_cpu),
                ("daedalus-runtime", "gRPC, 1 connection", &grpc, grpc_cpu),
                ("daedalus-runtime", "gRPC, a connection per call", &spread, spread_cpu),
                ("daedalus-runtime", "JSON-RPC, a connection per call", &jsonrpc, jsonrpc_cpu),
            ];
            for (server, binding, f, cpu) in rows {
                println!(
                    "| {in_flight} | {server} | {binding} | {:.0} | {:.3} ms | {:.3} ms | {cpu:.0} µs |",
                    f.rate, f.p50_ms, f.p99_ms
                );
            }
            verdicts.push(format!(
                "at {in_flight} in flight: gRPC is {:.0}× the SDK's gRPC requests per second \
                 (p99 1/{:.0} of its), and {:.2}× our JSON-RPC's (p99 {:.2}×)",
                grpc.rate / baseline.rate,
                baseline.p99_ms / grpc.p99_ms,
                grpc.rate / jsonrpc.rate,
                grpc.p99_ms / jsonrpc.p99_ms,
            ));
        }
        println!();
        for verdict in verdicts {
            println!("{verdict}");
        }
    });
}
