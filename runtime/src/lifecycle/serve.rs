//! The HTTP accept loop: hyper with timeouts for slow clients, a connection cap, and a
//! graceful stop.
//!
//! `axum::serve` has no header-read timeout, so a client that opens a connection and never
//! finishes its headers would hold it forever. Here:
//! - a new connection must send its first bytes within `HEADER_READ_TIMEOUT` (hyper's
//!   HTTP/1-vs-HTTP/2 detection would otherwise wait for them forever), then HTTP/1 headers
//!   must arrive within the same timeout;
//! - HTTP/2 connections are pinged every `HEADER_READ_TIMEOUT` and closed when a ping goes
//!   unanswered for as long;
//! - at most `MAX_CONNECTIONS` connections are served at once per port. One more is still
//!   accepted and answered at once instead of waiting in the listen backlog (where a full
//!   backlog drops SYNs, and a client waits seconds for its kernel to try again): a probe
//!   (`GET /health`, `/healthz`, the agent card) is served, one request and closed, so held
//!   streams never starve it; anything else gets `503` with `Retry-After` and
//!   `Connection: close`. Past [`REFUSING_AT_ONCE`] such connections in flight, a connection
//!   is closed as soon as it is accepted.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::config::Limits;

/// How long open connections get to close once the server stops.
const CLOSE_GRACE: Duration = Duration::from_secs(5);
/// Connections over `MAX_CONNECTIONS` being answered `503` at once; past it, they are closed.
pub const REFUSING_AT_ONCE: usize = 256;
/// How long an answered connection over the limit may keep sending before it is closed.
const REFUSAL_LINGER: Duration = Duration::from_secs(1);
/// The most of its request read (and dropped) from a connection over the limit.
const REFUSAL_DRAIN: usize = 64 * 1024;

/// The HTTP/2 connection preface: a connection whose first bytes could still be it is not yet
/// known to be HTTP/1.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The limits one listening port enforces on its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// For the first bytes, the HTTP/1 headers, and HTTP/2 keep-alive pings.
    pub header_read_timeout: Duration,
    pub max_connections: usize,
}

impl From<&Limits> for ConnectionLimits {
    fn from(limits: &Limits) -> Self {
        Self {
            header_read_timeout: limits.header_read_timeout,
            max_connections: limits.max_connections,
        }
    }
}

/// Serves `app` on `listener` until `stop` fires, then closes idle connections and waits (a
/// bounded time) for busy ones to finish their current exchange.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    stop: CancellationToken,
) {
    let timeout = limits.header_read_timeout;
    let speakers = Speakers::new(timeout);
    let over_the_limit = over_the_limit_speaker(timeout);
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let refusing = Arc::new(Semaphore::new(REFUSING_AT_ONCE));
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    // Out of file descriptors and the like: back off, keep serving.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = stop.cancelled() => break,
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            // Over the limit: answered at once, never left waiting.
            if let Ok(permit) = Arc::clone(&refusing).try_acquire_owned() {
                let answering =
                    answer_over_the_limit(stream, app.clone(), over_the_limit.clone(), timeout);
                tokio::spawn(async move {
                    let _permit = permit;
                    answering.await;
                });
            }
            tracing::debug!(%peer, "a connection over MAX_CONNECTIONS was answered 503");
            continue;
        };
        let _ = stream.set_nodelay(true);
        let serving = serve_connection(
            stream,
            peer,
            app.clone(),
            speakers.clone(),
            graceful.watcher(),
            timeout,
        );
        tokio::spawn(async move {
            let _slot = slot;
            serving.await;
        });
    }
    drop(listener);
    if tokio::time::timeout(CLOSE_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("some connections were still open when the server stopped");
    }
}

/// One connection within the limit, in the protocol its first bytes tell, until it ends (or
/// the server's stop closes it gracefully).
async fn serve_connection(
    stream: TcpStream,
    peer: std::net::SocketAddr,
    app: Router,
    speakers: Speakers,
    watcher: hyper_util::server::graceful::Watcher,
    timeout: Duration,
) {
    let service = TowerToHyperService::new(app);
    let io = TokioIo::new(stream);
    let ended = match protocol_of(io.inner(), timeout).await {
        None => {
            tracing::debug!(%peer, "closed a connection that sent nothing to tell its protocol by");
            return;
        }
        // Each protocol's connection in its own allocation: a held HTTP/1 stream does not
        // carry the room of an HTTP/2 connection's state.
        Some(Protocol::Http1) => {
            let conn = speakers.http1.serve_connection(io, service);
            watcher.watch(conn).await
        }
        Some(Protocol::Http2) => {
            let conn = speakers.http2.serve_connection(io, service);
            Box::pin(watcher.watch(conn)).await
        }
    };
    if let Err(e) = ended {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}

/// How a connection over the limit is spoken to: either protocol, HTTP/1 closed after its one
/// request.
fn over_the_limit_speaker(timeout: Duration) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(timeout)
        .keep_alive(false);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(timeout))
        .keep_alive_timeout(timeout);
    builder
}

/// A connection over `MAX_CONNECTIONS`: a probe is served (one request), anything else is
/// answered `503` at once.
async fn answer_over_the_limit(
    stream: TcpStream,
    app: Router,
    speaker: auto::Builder<TokioExecutor>,
    timeout: Duration,
) {
    if is_probe(&stream, timeout).await {
        let service = TowerToHyperService::new(app);
        let _ = speaker
            .serve_connection(TokioIo::new(stream), service)
            .await;
    } else {
        refuse_busy(stream).await;
    }
}

/// Whether the connection's first request (read within `timeout`, not consumed) is a probe
/// that must never wait: `GET /health`, `GET /healthz`, or the agent card.
async fn is_probe(stream: &TcpStream, timeout: Duration) -> bool {
    const PROBES: [&[u8]; 3] = [
        b"GET /health ",
        b"GET /healthz ",
        b"GET /.well-known/agent-card.json ",
    ];
    let longest = PROBES.iter().map(|p| p.len()).max().unwrap_or(0);
    let sniff = async {
        let mut buf = [0u8; 64];
        loop {
            let n = match stream.peek(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => n,
            };
            let seen = &buf[..n];
            if PROBES.iter().any(|p| seen.starts_with(p)) {
                return true;
            }
            let could_be = PROBES
                .iter()
                .any(|p| p.starts_with(&seen[..n.min(p.len())]));
            if !could_be || n >= longest {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(timeout.min(REFUSAL_LINGER), sniff)
        .await
        .unwrap_or(false)
}

/// Answers a connection over the limit: `503` with `Retry-After` and `Connection: close`, then
/// reads (and drops) what it still sends for a moment, so its request does not reset the
/// connection before it reads the answer.
async fn refuse_busy(mut stream: TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = serde_json::to_string(&daedalus_contract::ErrorBody::new(
        503,
        "the runtime serves as many connections as it may (MAX_CONNECTIONS); retry later",
    ))
    .unwrap_or_default();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.set_nodelay(true);
    if stream.write_all(answer.as_bytes()).await.is_err() {
        return;
    }
    let _ = stream.shutdown().await;
    let drain = async {
        let mut buf = [0u8; 4096];
        let mut read = 0;
        while read < REFUSAL_DRAIN {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => read += n,
            }
        }
    };
    let _ = tokio::time::timeout(REFUSAL_LINGER, drain).await;
}

/// The protocol a connection speaks, told by its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Http1,
    Http2,
}

/// How each protocol is served: the timeouts of the module docs.
#[derive(Clone)]
struct Speakers {
    http1: http1::Builder,
    http2: http2::Builder<TokioExecutor>,
}

impl Speakers {
    fn new(timeout: Duration) -> Self {
        let mut http1 = http1::Builder::new();
        http1.timer(TokioTimer::new()).header_read_timeout(timeout);
        // No read while a response is being written: otherwise hyper reserves a second 8 KiB
        // read buffer per connection to watch for the client's EOF, on every held stream. A
        // client that goes away mid-stream is found by the next write instead (a stream's
        // keep-alive comment comes every 15 s), and stops nothing either way.
        http1.half_close(true);
        let mut http2 = http2::Builder::new(TokioExecutor::new());
        http2
            .timer(TokioTimer::new())
            .keep_alive_interval(Some(timeout))
            .keep_alive_timeout(timeout);
        Self { http1, http2 }
    }
}

/// Waits (at most `timeout`) until the client has sent enough to tell HTTP/1 from HTTP/2:
/// bytes that are not a prefix of the HTTP/2 preface (HTTP/1), or the whole preface (HTTP/2).
/// `None` when the time ran out or the client closed first. Nothing is consumed.
async fn protocol_of(stream: &TcpStream, timeout: Duration) -> Option<Protocol> {
    let sniff = async {
        let mut buf = [0u8; H2_PREFACE.len()];
        loop {
            match stream.peek(&mut buf).await {
                Ok(0) | Err(_) => return None,
                Ok(n) if !H2_PREFACE.starts_with(&buf[..n]) => return Some(Protocol::Http1),
                Ok(n) if n == buf.len() => return Some(Protocol::Http2),
                // Part of the preface so far: peek returns at once while nothing new came, so
                // look again a little later.
                Ok(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
    };
    tokio::time::timeout(timeout, sniff).await.ok().flatten()
}
