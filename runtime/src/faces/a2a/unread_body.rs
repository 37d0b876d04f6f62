//! A response sent before its request body was read to the end must not leave that body on a
//! kept-alive connection: the next pipelined request would be read from the middle of it.
//! Early error paths drain a bounded body themselves (413, 415); this layer is the backstop for
//! every other one (503 while starting or draining, 404, 405, a panic): if the body was not
//! read to its end, the response carries `Connection: close`.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::Request;
use axum::http::HeaderValue;
use axum::http::header::CONNECTION;
use axum::middleware::Next;
use axum::response::Response;
use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};

/// The middleware: see the module docs.
pub(super) async fn close_if_body_unread(req: Request, next: Next) -> Response {
    // Only HTTP/1 reads requests one after another on a connection; HTTP/2 has no
    // `Connection` header to send.
    if req.body().is_end_stream() || req.version() >= axum::http::Version::HTTP_2 {
        return next.run(req).await;
    }
    let finished = Arc::new(AtomicBool::new(false));
    let req = req.map(|inner| {
        Body::new(Tracked {
            inner,
            finished: Arc::clone(&finished),
        })
    });
    let mut response = next.run(req).await;
    if !finished.load(Ordering::Acquire) {
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// A body that records when it has been read to its end.
struct Tracked {
    inner: Body,
    finished: Arc<AtomicBool>,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || self.inner.is_end_stream() {
            self.finished.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
