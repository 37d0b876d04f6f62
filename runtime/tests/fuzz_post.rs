//! A seeded, bounded black-box fuzz run of `POST /` against the real binary: mutated bodies,
//! content types, header values, the passthrough directives (with hostile durations) and
//! pipelined requests, with ordinary tasks interleaved.
//!
//! Oracles: every request is answered within the timeout with a documented status and a JSON
//! error body (or the Task); the process never exits; `/health` stays 200; every ordinary task
//! gets its one, right answer. `FUZZ_SEED` and `FUZZ_ROUNDS` replay or deepen a run.

mod support;

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use support::process::runtime;

/// Statuses `POST /` documents.
const DOCUMENTED: [u16; 6] = [200, 400, 408, 413, 415, 503];

const DIRECTIVES: [&str; 8] = [
    "hello",
    "***SLEEP 5ms slept",
    "***FAIL on purpose",
    "***INPUT which one?",
    "***SLEEP 153722867280912929m1hrs6148914691236517205333ms1281023894007607h x",
    "***SLEEP -1s x",
    "***SLEEP NaNs x",
    "\u{0}\u{7f}\r\n***FAIL",
];

const CONTENT_TYPES: [&str; 7] = [
    "application/json",
    "application/a2a+json",
    "application/json; charset=utf-8",
    "application/json; charset=latin1",
    "text/plain",
    "application/jsonx",
    "",
];

fn seed() -> u64 {
    std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0xDAED_A105)
}

fn rounds() -> usize {
    std::env::var("FUZZ_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150)
}

/// A request body: valid, then mutated byte by byte a few times (or not at all).
fn body(rng: &mut StdRng, round: usize) -> Vec<u8> {
    let text = DIRECTIVES[rng.random_range(0..DIRECTIVES.len())];
    let mut message =
        json!({"messageId": format!("f-{round}"), "role": "user", "parts": [{"text": text}]});
    if rng.random_bool(0.3) {
        message["taskId"] = json!("t".repeat(rng.random_range(1..3000)));
    }
    if rng.random_bool(0.2) {
        message["contextId"] = json!("mcp/agent");
    }
    let mut request = json!({"message": message});
    if rng.random_bool(0.2) {
        request["configuration"] = json!({"historyLength": rng.random_range(-2..5)});
    }
    let mut bytes = serde_json::to_vec(&request).expect("JSON");
    let mutations = if rng.random_bool(0.4) {
        0
    } else {
        rng.random_range(1..6)
    };
    for _ in 0..mutations {
        if bytes.is_empty() {
            break;
        }
        let at = rng.random_range(0..bytes.len());
        match rng.random_range(0..5) {
            0 => bytes[at] = rng.random(),
            1 => {
                bytes.remove(at);
            }
            2 => {
                const JSONISH: &[u8] = b"{}[]\",:\\0-e9";
                bytes.insert(at, JSONISH[rng.random_range(0..JSONISH.len())]);
            }
            3 => bytes.truncate(at),
            _ => {
                let end = (at + rng.random_range(1..40)).min(bytes.len());
                let copy = bytes[at..end].to_vec();
                bytes.splice(at..at, copy);
            }
        }
    }
    bytes
}

/// One HTTP/1.1 POST / with a correct Content-Length.
fn request(rng: &mut StdRng, body: &[u8]) -> Vec<u8> {
    let content_type = CONTENT_TYPES[rng.random_range(0..CONTENT_TYPES.len())];
    let mut head = String::from("POST / HTTP/1.1\r\nHost: fuzz\r\n");
    if !content_type.is_empty() {
        let _ = write!(head, "Content-Type: {content_type}\r\n");
    }
    if rng.random_bool(0.2) {
        head.push_str("Authorization: Bearer ");
        head.push_str(&"x".repeat(rng.random_range(1..4000)));
        head.push_str("\r\n");
    }
    if rng.random_bool(0.2) {
        let _ = write!(
            head,
            "traceparent: 00-{:032x}-{:016x}-01\r\n",
            rng.random::<u128>(),
            rng.random::<u64>()
        );
    }
    let _ = write!(head, "Content-Length: {}\r\n\r\n", body.len());
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// Reads one response: its status and body.
fn read_response(stream: &mut TcpStream, what: &str) -> (u16, Vec<u8>) {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        let n = stream
            .read(&mut byte)
            .unwrap_or_else(|e| panic!("{what}: no answer within the timeout ({e})"));
        assert!(
            n == 1,
            "the connection closed before an answer: {}",
            String::from_utf8_lossy(&buf)
        );
        buf.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buf).into_owned();
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {head}"));
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())
                .flatten()
        })
        .unwrap_or_else(|| panic!("no Content-Length: {head}"));
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).expect("the whole body");
    (status, body)
}

fn check(status: u16, body: &[u8], what: &str) -> Value {
    assert!(
        DOCUMENTED.contains(&status),
        "{what}: undocumented status {status}"
    );
    let value: Value = serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("{what}: {status} without a JSON body ({e})"));
    if status != 200 {
        assert_eq!(value["error"]["code"], status, "{what}: {value}");
    }
    value
}

fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).expect("connects");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    stream
}

#[test]
fn hostile_posts_get_documented_answers_and_ordinary_tasks_still_get_theirs() {
    // A directive may ask to sleep for ages: the request timeout ends it (a failed Task).
    let mut rt = runtime()
        .env("MAX_BODY_SIZE", "64KiB")
        .env("REQUEST_TIMEOUT", "2s")
        .start();
    let mut rng = StdRng::seed_from_u64(seed());
    let mut ordinary = 0;
    for round in 0..rounds() {
        let what = format!("seed {} round {round}", seed());
        if round % 10 == 0 {
            // An ordinary task among the hostile ones.
            let text = format!("ordinary {round}");
            let body = serde_json::to_vec(&json!({"message": {"messageId": format!("ok-{round}"),
                "role": "user", "parts": [{"text": text}]}}))
            .expect("JSON");
            let mut stream = connect(rt.addr);
            let mut bytes = format!(
                "POST / HTTP/1.1\r\nHost: fuzz\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .into_bytes();
            bytes.extend_from_slice(&body);
            stream.write_all(&bytes).expect("writes");
            let (status, answer) = read_response(&mut stream, &what);
            let task = check(status, &answer, &what);
            assert_eq!(status, 200, "{what}: {task}");
            assert_eq!(task["status"]["state"], "completed", "{what}");
            assert_eq!(
                task["artifacts"][0]["parts"][0]["text"],
                text.as_str(),
                "{what}"
            );
            ordinary += 1;
            continue;
        }
        let first = body(&mut rng, round);
        let mut bytes = request(&mut rng, &first);
        let pipelined = rng.random_bool(0.25);
        if pipelined {
            let second = body(&mut rng, round + 100_000);
            bytes.extend(request(&mut rng, &second));
        }
        let mut stream = connect(rt.addr);
        stream.write_all(&bytes).expect("writes");
        let what = format!(
            "{what}: {}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(600)])
        );
        let (status, answer) = read_response(&mut stream, &what);
        check(status, &answer, &what);
        if pipelined {
            let (status, answer) = read_response(&mut stream, &what);
            check(status, &answer, &format!("{what} (pipelined)"));
        }
        assert!(
            rt.child.try_wait().expect("try_wait").is_none(),
            "{what}: the runtime exited"
        );
    }
    assert!(ordinary > 0);
    let mut stream = connect(rt.addr);
    stream
        .write_all(b"GET /health HTTP/1.1\r\nHost: fuzz\r\n\r\n")
        .expect("writes");
    assert_eq!(
        read_response(&mut stream, "health").0,
        200,
        "healthy after the run"
    );
    assert!(
        rt.child.try_wait().expect("try_wait").is_none(),
        "the runtime exited"
    );
    rt.signal("TERM");
    assert!(rt.wait_exit(Duration::from_secs(30)).success());
}
