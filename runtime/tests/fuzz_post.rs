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

/// A credential a hostile caller might send: random schemes, JWT-shaped strings whose parts
/// are random (or random JSON), bytes outside ASCII, huge values.
fn hostile_authorization(rng: &mut StdRng) -> Vec<u8> {
    use base64::Engine;
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let random_bytes = |rng: &mut StdRng, n: usize| -> Vec<u8> {
        (0..n).map(|_| rng.random_range(0x20u8..=0xff)).collect()
    };
    let headers = [
        r#"{"alg":"none"}"#,
        r#"{"alg":"HS256","kid":"k1"}"#,
        r#"{"alg":"EdDSA","kid":"k1","jku":"http://evil.example/jwks"}"#,
        r#"{"alg":"RS256","kid":"../../etc/passwd"}"#,
        r#"{"alg":["RS256"]}"#,
        r#"{"alg":null}"#,
        "{}",
        "not json",
    ];
    let claims = [
        r#"{"iss":"https://idp.fuzz","aud":"daedalus","sub":"root","exp":99999999999}"#,
        r#"{"sub":null,"exp":"tomorrow"}"#,
        "[]",
        r#"{"exp":1e309}"#,
    ];
    let value: Vec<u8> = match rng.random_range(0..6) {
        0 => {
            let header = headers[rng.random_range(0..headers.len())];
            let claim = claims[rng.random_range(0..claims.len())];
            let n = rng.random_range(0..300);
            let signature = random_bytes(rng, n);
            format!(
                "Bearer {}.{}.{}",
                b64(header.as_bytes()),
                b64(claim.as_bytes()),
                b64(&signature)
            )
            .into_bytes()
        }
        1 => {
            let mut v = b"Bearer ".to_vec();
            let n = rng.random_range(0..20_000);
            v.extend(random_bytes(rng, n));
            v
        }
        2 => format!(
            "{} {}",
            ["Basic", "Digest", "bearer", "BEARER", "Token", ""][rng.random_range(0..6)],
            "x".repeat(rng.random_range(0..100))
        )
        .into_bytes(),
        3 => format!("Bearer {}", ".".repeat(rng.random_range(1..10))).into_bytes(),
        4 => format!("Bearer {}", "a.".repeat(rng.random_range(1..3000))).into_bytes(),
        _ => {
            let mut v = b"Bearer ".to_vec();
            v.extend(b64(&random_bytes(rng, 40)).into_bytes());
            v
        }
    };
    value
        .into_iter()
        .filter(|b| *b != b'\r' && *b != b'\n')
        .collect()
}

#[test]
fn hostile_credentials_get_a_challenge_and_good_ones_still_get_their_task() {
    let dir = tempfile::tempdir().expect("a dir");
    let keys = dir.path().join("keys.yaml");
    std::fs::write(
        &keys,
        format!(
            "keys:\n  - sha256: {}\n    principal: fuzz-bot\n",
            daedalus_runtime::platform::identity::api_keys::hash_hex("good-key")
        ),
    )
    .expect("written");
    let jwks = dir.path().join("jwks.json");
    std::fs::write(
        &jwks,
        r#"{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"k1","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}"#,
    )
    .expect("written");
    let mut rt = runtime()
        .env("AUTH_API_KEYS_FILE", keys.to_str().expect("utf-8"))
        .env("AUTH_ISSUER", "https://idp.fuzz")
        .env("AUTH_AUDIENCE", "daedalus")
        .env("AUTH_JWKS_FILE", jwks.to_str().expect("utf-8"))
        .start();
    let mut rng = StdRng::seed_from_u64(seed() ^ 0xA07);
    let body = serde_json::to_vec(&json!({"message": {"messageId": "m-fuzz", "role": "user",
        "parts": [{"text": "hi"}]}}))
    .expect("JSON");
    let post = |authorization: &[u8], extra: &str| {
        let mut bytes = format!(
            "POST / HTTP/1.1\r\nHost: fuzz\r\nContent-Type: application/json\r\n{extra}Content-Length: {}\r\n",
            body.len()
        )
        .into_bytes();
        if !authorization.is_empty() {
            bytes.extend_from_slice(b"Authorization: ");
            bytes.extend_from_slice(authorization);
            bytes.extend_from_slice(b"\r\n");
        }
        bytes.extend_from_slice(b"\r\n");
        bytes.extend_from_slice(&body);
        bytes
    };
    for round in 0..rounds() {
        let what = format!("seed {} round {round}", seed());
        let (bytes, good) = if round % 10 == 0 {
            (post(b"", "X-API-Key: good-key\r\n"), true)
        } else {
            let authorization = hostile_authorization(&mut rng);
            let extra = if rng.random_bool(0.3) {
                "X-API-Key: bad-key\r\n"
            } else {
                ""
            };
            (post(&authorization, extra), false)
        };
        let mut stream = connect(rt.addr);
        stream.write_all(&bytes).expect("writes");
        let (status, answer) = read_response(&mut stream, &what);
        if good {
            let task = check(status, &answer, &what);
            assert_eq!(status, 200, "{what}: {task}");
        } else {
            // 400 only for a header hyper will not read at all.
            assert!(
                status == 401 || status == 400,
                "{what}: {status} for {}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(300)])
            );
            if status == 401 {
                let value: Value = serde_json::from_slice(&answer).expect("a JSON body");
                assert_eq!(value["error"]["code"], 401, "{what}: {value}");
            }
        }
        assert!(
            rt.child.try_wait().is_ok_and(|s| s.is_none()),
            "{what}: the runtime exited"
        );
    }
}
