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
//! - at most `MAX_CONNECTIONS` connections are served at once per port; more wait in the
//!   listen backlog.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
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
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(timeout))
        .keep_alive_timeout(timeout);
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    loop {
        let slot = tokio::select! {
            slot = Arc::clone(&slots).acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
            () = stop.cancelled() => break,
        };
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
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let builder = builder.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let _slot = slot;
            if !first_bytes_arrive(&stream, timeout).await {
                tracing::debug!(%peer, "closed a connection that sent nothing to tell its protocol by");
                return;
            }
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
            if let Err(e) = watcher.watch(conn.into_owned()).await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
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

/// Waits (at most `timeout`) until the client has sent enough to tell HTTP/1 from HTTP/2:
/// bytes that are not a prefix of the HTTP/2 preface, or the whole preface. False when the
/// time ran out or the client closed first.
async fn first_bytes_arrive(stream: &TcpStream, timeout: Duration) -> bool {
    let sniff = async {
        let mut buf = [0u8; H2_PREFACE.len()];
        loop {
            match stream.peek(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) if n == buf.len() || !H2_PREFACE.starts_with(&buf[..n]) => return true,
                // Part of the preface so far: peek returns at once while nothing new came, so
                // look again a little later.
                Ok(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
    };
    tokio::time::timeout(timeout, sniff).await.unwrap_or(false)
}
