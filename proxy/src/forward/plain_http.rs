//! Tasks to an `http://` runtime: `POST /` over HTTP/1 connections this module holds itself,
//! each driven inline by the worker that sends on it.
//!
//! hyper-util's pooled client spawns a task per connection and hands every request and
//! response across tasks (a wakeup each way), with a pool lock, idle timers and a connecting
//! state machine around it. A worker sends one task at a time, so none of that is needed: a
//! worker takes an idle connection from [`PlainHttp`]'s free list (or opens one), polls the
//! request and the connection in its own task until the whole answer is read, and puts the
//! connection back. At most one connection per worker exists; a connection the runtime closed
//! while idle is noticed when it is next used, and the task is sent again on a new one (it was
//! never written, so the runtime cannot have seen it).

use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use daedalus_contract::error_chain::error_chain;
use futures::future::{Either, select};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::forward::event_stream::EventStreamReader;
use crate::forward::forwarder::{ForwardError, Reply};

/// Longest wait for a TCP connection to the runtime.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// An HTTP/1 connection: the request half and the connection future that drives it (polled
/// only while a request is in flight, by the task that sends it).
struct Http1 {
    sender: SendRequest<Full<Bytes>>,
    connection: Pin<Box<http1::Connection<TokioIo<TcpStream>, Full<Bytes>>>>,
}

/// The task path to an `http://` runtime: idle connections, and the request line parts
/// parsed once.
pub(crate) struct PlainHttp {
    idle: Mutex<Vec<Http1>>,
    /// `host:port` to connect to.
    authority: String,
    uri: http::Uri,
    host: http::HeaderValue,
}

impl std::fmt::Debug for PlainHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlainHttp")
            .field("authority", &self.authority)
            .finish_non_exhaustive()
    }
}

/// How an answer is read.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Reading<'a> {
    /// The whole body, whatever it is.
    Whole,
    /// A `text/event-stream` answer event by event, each event's data sent to the channel as it
    /// arrives, the answer being the Task the stream rebuilds; any other answer whole.
    Events(&'a mpsc::Sender<Bytes>),
}

/// How one exchange on one connection ended.
enum Exchange {
    Answered(Reply),
    /// The connection failed before the request was written (closed while idle, or refused
    /// it): the runtime did not see the task.
    NotSent(String),
    /// The connection failed once the request may have been written.
    Failed(String),
}

impl PlainHttp {
    /// The task path to `uri` (an `http://` URI of `POST /`); `None` for any other scheme, or
    /// a URI without a host.
    pub(crate) fn new(uri: &http::Uri) -> Option<Self> {
        if uri.scheme() != Some(&http::uri::Scheme::HTTP) {
            return None;
        }
        let authority = uri.authority()?;
        let port = authority.port_u16().unwrap_or(80);
        let host = http::HeaderValue::from_str(authority.as_str()).ok()?;
        let authority = format!("{}:{port}", authority.host());
        let path = uri
            .path_and_query()
            .map_or("/", http::uri::PathAndQuery::as_str);
        let uri = path.parse().ok()?;
        Some(Self {
            idle: Mutex::new(Vec::new()),
            authority,
            uri,
            host,
        })
    }

    /// Sends one task and reads its answer as `reading` says. A connection the runtime closed
    /// while idle is replaced and the request sent again on a new one.
    pub(crate) async fn send(
        &self,
        body: Bytes,
        headers: http::HeaderMap,
        reading: Reading<'_>,
    ) -> Result<Reply, ForwardError> {
        loop {
            let (connection, reused) = match self.take_idle() {
                Some(idle) => (idle, true),
                None => (self.connect().await?, false),
            };
            match self
                .exchange(connection, body.clone(), headers.clone(), reading)
                .await
            {
                Exchange::Answered(reply) => return Ok(reply),
                // A stale idle connection: try a fresh one.
                Exchange::NotSent(_) if reused => {}
                Exchange::NotSent(why) => return Err(ForwardError::Unreached(why)),
                Exchange::Failed(why) => return Err(ForwardError::Io(why)),
            }
        }
    }

    fn take_idle(&self) -> Option<Http1> {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
    }

    fn put_back(&self, connection: Http1) {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(connection);
    }

    /// A new connection, handshaken (HTTP/1 needs no bytes for that).
    async fn connect(&self) -> Result<Http1, ForwardError> {
        let unreached = |why: String| ForwardError::Unreached(why);
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&self.authority))
            .await
            .map_err(|_| unreached(format!("connect timed out after {CONNECT_TIMEOUT:?}")))?
            .map_err(|e| unreached(format!("connect: {e}")))?;
        let _ = stream.set_nodelay(true);
        let (sender, connection) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| unreached(error_chain(&e)))?;
        Ok(Http1 {
            sender,
            connection: Box::pin(connection),
        })
    }

    /// One request and its whole answer on `connection`, the connection polled alongside in
    /// this task. The connection goes back to the idle list if it can carry another request.
    async fn exchange(
        &self,
        connection: Http1,
        body: Bytes,
        headers: http::HeaderMap,
        reading: Reading<'_>,
    ) -> Exchange {
        let mut request = http::Request::new(Full::new(body));
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = self.uri.clone();
        *request.headers_mut() = headers;
        request
            .headers_mut()
            .insert(http::header::HOST, self.host.clone());
        let Http1 {
            mut sender,
            connection: driver,
        } = connection;
        let exchange = Box::pin(async {
            if let Err(e) = sender.ready().await {
                return Exchange::NotSent(error_chain(&e));
            }
            match sender.send_request(request).await {
                Ok(response) => read_answer(response, reading).await,
                Err(e) if e.is_canceled() => Exchange::NotSent(error_chain(&e)),
                Err(e) => Exchange::Failed(error_chain(&e)),
            }
        });
        let (outcome, driver) = match select(exchange, driver).await {
            Either::Left((outcome, driver)) => (outcome, Some(driver)),
            // The connection ended first, and is dropped now: a request it never wrote is
            // canceled (the runtime did not see it), one it wrote ends in an error, and an
            // answer it had read in full is still there.
            Either::Right((_, exchange)) => (exchange.await, None),
        };
        if let Some(driver) = driver
            && matches!(outcome, Exchange::Answered(_))
            && !sender.is_closed()
        {
            self.put_back(Http1 {
                sender,
                connection: driver,
            });
        }
        outcome
    }
}

/// Reads the status and the body: the whole of it, or, for an event stream read as one, its
/// events as they arrive and the Task they rebuild.
async fn read_answer(response: http::Response<Incoming>, reading: Reading<'_>) -> Exchange {
    let status = response.status().as_u16();
    let retry_after = super::forwarder::retry_after(response.headers());
    let is_event_stream = status == 200
        && response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
    if let (Reading::Events(events), true) = (reading, is_event_stream) {
        return read_events(response.into_body(), events).await;
    }
    match response.into_body().collect().await {
        Ok(body) => Exchange::Answered(Reply {
            status,
            body: body.to_bytes(),
            retry_after,
        }),
        Err(e) => Exchange::Failed(error_chain(&e)),
    }
}

/// Reads an event stream to its end, handing each event's data on as it arrives.
async fn read_events(mut body: Incoming, events: &mpsc::Sender<Bytes>) -> Exchange {
    let mut reader = EventStreamReader::new();
    while let Some(frame) = body.frame().await {
        let data = match frame {
            Ok(frame) => match frame.into_data() {
                Ok(data) => data,
                Err(_) => continue,
            },
            Err(e) => return Exchange::Failed(error_chain(&e)),
        };
        match reader.push(&data) {
            Ok(complete) => {
                for event in complete {
                    // Best effort: a relay that has stopped listening loses nothing here.
                    let _ = events.send(event).await;
                }
            }
            Err(e) => return Exchange::Failed(e.to_string()),
        }
    }
    match reader.into_reply() {
        Ok(reply) => Exchange::Answered(reply),
        Err(e) => Exchange::Failed(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::TcpListener;

    use super::*;

    /// A runtime that answers each request with 200 and keep-alive, then closes the
    /// connection when `close_after_answer`; counts the connections it accepted.
    async fn runtime(close_after_answer: bool) -> (http::Uri, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let uri = format!("http://{}/", listener.local_addr().expect("addr"))
            .parse()
            .expect("a URI");
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&accepted);
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut seen = Vec::new();
                    let mut buf = [0u8; 4096];
                    loop {
                        let Ok(n) = socket.read(&mut buf).await else {
                            return;
                        };
                        if n == 0 {
                            return;
                        }
                        seen.extend_from_slice(&buf[..n]);
                        // Each test request has a 2-byte body: answer once it is all here.
                        let Some(head) = seen.windows(4).position(|w| w == b"\r\n\r\n") else {
                            continue;
                        };
                        if seen.len() < head + 4 + 2 {
                            continue;
                        }
                        seen.drain(..head + 4 + 2);
                        let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                        if socket.write_all(answer).await.is_err() || close_after_answer {
                            return;
                        }
                    }
                });
            }
        });
        (uri, accepted)
    }

    #[tokio::test]
    async fn tasks_share_one_connection_while_the_runtime_keeps_it_open() {
        let (uri, accepted) = runtime(false).await;
        let plain = PlainHttp::new(&uri).expect("an http URI");
        for _ in 0..3 {
            let reply = plain
                .send(
                    Bytes::from_static(b"{}"),
                    http::HeaderMap::new(),
                    Reading::Whole,
                )
                .await
                .expect("answered");
            assert_eq!((reply.status, reply.body.as_ref()), (200, b"ok".as_ref()));
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_connection_the_runtime_closed_while_idle_is_replaced_and_the_task_sent() {
        let (uri, accepted) = runtime(true).await;
        let plain = PlainHttp::new(&uri).expect("an http URI");
        for _ in 0..3 {
            // Let the close reach this side first: the idle connection is then stale.
            tokio::time::sleep(Duration::from_millis(20)).await;
            let reply = plain
                .send(
                    Bytes::from_static(b"{}"),
                    http::HeaderMap::new(),
                    Reading::Whole,
                )
                .await
                .expect("answered on a new connection");
            assert_eq!(reply.status, 200);
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_runtime_that_is_not_listening_is_unreached() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let uri: http::Uri = format!("http://{}/", listener.local_addr().expect("addr"))
            .parse()
            .expect("a URI");
        drop(listener);
        let plain = PlainHttp::new(&uri).expect("an http URI");
        let sent = plain
            .send(
                Bytes::from_static(b"{}"),
                http::HeaderMap::new(),
                Reading::Whole,
            )
            .await;
        assert!(matches!(sent, Err(ForwardError::Unreached(_))), "{sent:?}");
    }

    #[test]
    fn only_http_uris_take_this_path() {
        let https: http::Uri = "https://runtime:8443/".parse().expect("a URI");
        assert!(PlainHttp::new(&https).is_none());
        let http: http::Uri = "http://runtime/".parse().expect("a URI");
        assert_eq!(PlainHttp::new(&http).expect("http").authority, "runtime:80");
    }
}
