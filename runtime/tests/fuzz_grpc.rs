//! A seeded, bounded black-box fuzz run of the gRPC binding against the real binary, over raw
//! HTTP/2 (the `h2` crate, so any frame can be sent): proto messages mutated byte by byte,
//! frames whose length lies (short, long, past the limit), the compression flag, two messages
//! in a unary call, oversized messages, unknown methods and hostile metadata; and connections
//! that send the HTTP/2 preface and then garbage frames. Ordinary calls are interleaved.
//!
//! Oracles: every call is answered within the timeout with a `grpc-status` of a documented
//! code (a message that is or says it is over the limit exactly `RESOURCE_EXHAUSTED`, a
//! compressed one `UNIMPLEMENTED`), never `UNKNOWN` (a panic); the
//! process never exits; `/health` stays 200; every ordinary call gets its one, right answer.
//! `FUZZ_SEED` and `FUZZ_ROUNDS` replay or deepen a run.

mod support;

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use daedalus_contract::grpc::v1;
use prost::Message as _;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use support::grpc::send;
use support::process::runtime;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The body limit the run's runtime has: oversized messages are cheap to send.
const MAX_BODY: usize = 64 * 1024;
const ANSWER_WITHIN: Duration = Duration::from_secs(20);

/// `grpc-status` codes a call may end with: OK, CANCELLED, INVALID_ARGUMENT, NOT_FOUND,
/// RESOURCE_EXHAUSTED, FAILED_PRECONDITION, UNIMPLEMENTED, INTERNAL (tonic, a message it
/// cannot decode), UNAUTHENTICATED.
const DOCUMENTED: [u32; 9] = [0, 1, 3, 5, 8, 9, 12, 13, 16];

const METHODS: [&str; 7] = [
    "SendMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "GetExtendedAgentCard",
    "ListTaskPushNotificationConfigs",
    "NoSuchMethod",
];

fn seed() -> u64 {
    std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x629C_F022)
}

fn rounds() -> usize {
    std::env::var("FUZZ_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200)
}

/// A gRPC frame: the compression flag, the declared length, the message.
fn frame(compressed: bool, declared: u32, message: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(5 + message.len());
    out.put_u8(u8::from(compressed));
    out.put_u32(declared);
    out.put_slice(message);
    out.freeze()
}

/// What a round sends: the method, the body, and the status it must get (if one exactly).
struct Case {
    what: String,
    method: &'static str,
    body: Bytes,
    metadata: Vec<(String, Vec<u8>)>,
    expect: Option<u32>,
}

fn hostile(rng: &mut StdRng, round: usize) -> Case {
    let method = METHODS[rng.random_range(0..METHODS.len())];
    // Plain text: no byte flip can make a passthrough directive (`***SLEEP 1h`) of it.
    let mut message = send(&format!("f-{round}"), "plain fuzz").encode_to_vec();
    let mut metadata = vec![("a2a-version".to_owned(), b"1.0".to_vec())];
    let (what, body, expect) = match rng.random_range(0..8) {
        0 => {
            for _ in 0..rng.random_range(1..8) {
                if !message.is_empty() {
                    let at = rng.random_range(0..message.len());
                    message[at] = rng.random();
                }
            }
            let declared = u32::try_from(message.len()).expect("small");
            ("mutated proto", frame(false, declared, &message), None)
        }
        1 => {
            let declared = u32::try_from(message.len()).expect("small") + rng.random_range(1..64);
            (
                "a frame shorter than it says",
                frame(false, declared, &message),
                None,
            )
        }
        2 => {
            let declared = rng.random_range(u32::try_from(MAX_BODY).expect("small") + 1..=u32::MAX);
            (
                "a frame declaring more than the limit",
                frame(false, declared, &message),
                Some(8),
            )
        }
        3 => {
            let declared = u32::try_from(message.len()).expect("small");
            (
                "the compression flag",
                frame(true, declared, &message),
                None,
            )
        }
        4 => {
            let declared = u32::try_from(message.len()).expect("small");
            let one = frame(false, declared, &message);
            let mut two = BytesMut::from(&one[..]);
            two.extend_from_slice(&one);
            ("two messages in a unary call", two.freeze(), None)
        }
        5 => {
            let big = send("big", &"x".repeat(MAX_BODY + rng.random_range(1..4096)));
            let message = big.encode_to_vec();
            let declared = u32::try_from(message.len()).expect("small");
            (
                "an oversized message",
                frame(false, declared, &message),
                Some(8),
            )
        }
        6 => {
            let n = rng.random_range(0..64);
            let garbage: Vec<u8> = (0..n).map(|_| rng.random()).collect();
            ("random bytes", Bytes::from(garbage), None)
        }
        _ => {
            let value: Vec<u8> = (0..rng.random_range(0..300))
                .map(|_| rng.random_range(0x20u8..0x7f))
                .collect();
            let name = [
                "a2a-version",
                "traceparent",
                "authorization",
                "a2a-extensions",
            ][rng.random_range(0..4)];
            metadata.retain(|(n, _)| n != name);
            metadata.push((name.to_owned(), value));
            let declared = u32::try_from(message.len()).expect("small");
            ("hostile metadata", frame(false, declared, &message), None)
        }
    };
    Case {
        what: format!("round {round}: {what} to {method}"),
        method,
        body,
        metadata,
        expect,
    }
}

/// The `grpc-status` of a call (headers of a trailers-only answer, or its trailers), and the
/// messages it answered with.
async fn call(addr: &str, case: &Case) -> (u32, Vec<Bytes>) {
    let tcp = TcpStream::connect(addr).await.expect("connects");
    let (mut client, connection) = h2::client::handshake(tcp).await.expect("HTTP/2");
    tokio::spawn(connection);
    let mut request = http::Request::builder()
        .method("POST")
        .uri(format!(
            "http://{addr}/lf.a2a.v1.A2AService/{}",
            case.method
        ))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (name, value) in &case.metadata {
        if let Ok(value) = http::HeaderValue::from_bytes(value) {
            request = request.header(name.as_str(), value);
        }
    }
    let request = request.body(()).expect("a request");
    let (response, mut body) = client.send_request(request, false).expect("sent");
    // The server may answer (and reset the stream) before it reads everything.
    let _ = body.send_data(case.body.clone(), true);
    let response = response.await.expect("an answer");
    let status_of = |headers: &http::HeaderMap| {
        headers
            .get("grpc-status")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u32>().ok())
    };
    if let Some(status) = status_of(response.headers()) {
        return (status, Vec::new());
    }
    let mut answer = response.into_body();
    let mut messages = Vec::new();
    while let Some(data) = answer.data().await {
        let data = data.expect("data");
        let _ = answer.flow_control().release_capacity(data.len());
        messages.push(data);
    }
    let trailers = answer
        .trailers()
        .await
        .expect("trailers")
        .expect("trailers");
    (status_of(&trailers).expect("a grpc-status"), messages)
}

/// A connection that speaks the HTTP/2 preface and then garbage: closed, at the latest when
/// the keep-alive ping it never answers times out.
async fn garbage_connection(addr: &str, rng: &mut StdRng) {
    let mut tcp = TcpStream::connect(addr).await.expect("connects");
    let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    let n = rng.random_range(1..512);
    bytes.extend((0..n).map(|_| rng.random::<u8>()));
    let _ = tcp.write_all(&bytes).await;
    let mut sink = Vec::new();
    let read = tokio::time::timeout(ANSWER_WITHIN, tcp.read_to_end(&mut sink)).await;
    assert!(read.is_ok(), "a garbage connection is closed in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_grpc_calls_get_documented_statuses_and_ordinary_calls_still_get_theirs() {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut rt = runtime()
        .env("MAX_BODY_SIZE", &MAX_BODY.to_string())
        .env("BODY_READ_TIMEOUT", "2s")
        // A connection stuck mid-frame is pinged after this, and closed as long after.
        .env("HEADER_READ_TIMEOUT", "2s")
        .start();
    let addr = rt
        .url("")
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let mut ordinary = 0;
    for round in 0..rounds() {
        if rng.random_bool(0.1) {
            garbage_connection(&addr, &mut rng).await;
        } else if rng.random_bool(0.15) {
            let text = format!("ordinary {round}");
            let message = send(&format!("ok-{round}"), &text).encode_to_vec();
            let case = Case {
                what: format!("round {round} (seed {seed}): ordinary"),
                method: "SendMessage",
                body: frame(
                    false,
                    u32::try_from(message.len()).expect("small"),
                    &message,
                ),
                metadata: vec![("a2a-version".to_owned(), b"1.0".to_vec())],
                expect: Some(0),
            };
            let (status, messages) = tokio::time::timeout(ANSWER_WITHIN, call(&addr, &case))
                .await
                .unwrap_or_else(|_| panic!("{}: answered in time", case.what));
            assert_eq!(status, 0, "{}", case.what);
            let answer = v1::SendMessageResponse::decode(&messages.concat()[5..]).expect("proto");
            let Some(v1::send_message_response::Payload::Task(task)) = answer.payload else {
                panic!("{}: a task", case.what);
            };
            let part = &task.artifacts[0].parts[0].content;
            assert_eq!(part, &Some(v1::part::Content::Text(text)), "{}", case.what);
            ordinary += 1;
        } else {
            let case = hostile(&mut rng, round);
            let what = format!("{} (seed {seed})", case.what);
            let (status, _) = tokio::time::timeout(ANSWER_WITHIN, call(&addr, &case))
                .await
                .unwrap_or_else(|_| panic!("{what}: answered in time"));
            assert!(DOCUMENTED.contains(&status), "{what}: grpc-status {status}");
            assert_ne!(status, 2, "{what}: UNKNOWN is a panic");
            if let Some(expected) = case.expect {
                assert_eq!(status, expected, "{what}");
            }
        }
        assert!(
            rt.child.try_wait().expect("try_wait").is_none(),
            "round {round} (seed {seed}): the runtime exited"
        );
    }
    assert!(ordinary > 0);
    let health = reqwest::get(rt.url("/health")).await.expect("answers");
    assert_eq!(health.status(), 200, "healthy after the run");
    rt.signal("TERM");
    assert!(rt.wait_exit(Duration::from_secs(30)).success());
}
