//! [`TaskPost`]: the body extractor of `POST /`.
//!
//! In order: the content type must be `application/json` or `application/a2a+json` (a UTF-8
//! `charset` parameter is fine) else 415; a declared or actual body over the limit is 413; a
//! body that does not arrive within the body timeout is 408. Then a body whose object has a
//! `"jsonrpc"` key is a JSON-RPC request (docs/design.md §4); any other is read leniently as a contract
//! `SendMessageRequest`, and anything the reader refuses is 400 with the offending field's path.
//!
//! A request that carries `A2A-Version` is never the contract binding (the contract has no
//! such header): whatever its body or media type, it is answered as JSON-RPC.

use axum::body::Body;
use axum::extract::{FromRequest, Request};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;

use super::A2aFace;
use super::error::ApiError;

/// The most of a refused body read (and dropped) before the connection is closed instead.
const DISCARD_CAP: usize = 64 * 1024 * 1024;

/// What a `POST /` holds: a contract request, or a JSON-RPC one (a body whose object has a
/// `"jsonrpc"` key), or JSON-RPC whose envelope does not read.
#[derive(Debug)]
pub(super) enum TaskPost {
    Contract(Box<daedalus_contract::SendMessageRequest>),
    JsonRpc(daedalus_contract::JsonRpcRequest),
    BadJsonRpc(String),
    /// A JSON-RPC request (it carries `A2A-Version`) whose body is not JSON.
    NotJson(String),
    /// A JSON-RPC request sent in another media type: answered `ContentTypeNotSupportedError`.
    JsonRpcMediaType {
        id: daedalus_contract::JsonRpcId,
        found: String,
    },
}

impl FromRequest<A2aFace> for TaskPost {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &A2aFace) -> Result<Self, ApiError> {
        let a2a = req.headers().contains_key(super::operations::VERSION_PARAM);
        if let Err(refused) = check_content_type(req.headers().get(CONTENT_TYPE)) {
            return refused_media_type(req, state, refused, a2a).await;
        }
        let bytes = checked_body(req, state).await?;
        if a2a && !is_jsonrpc(&bytes) {
            if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&bytes) {
                return Ok(TaskPost::NotJson(e.to_string()));
            }
            return Ok(TaskPost::BadJsonRpc(
                "a request with A2A-Version must be a JSON-RPC request".to_owned(),
            ));
        }
        if is_jsonrpc(&bytes) {
            return Ok(match serde_json::from_slice(&bytes) {
                Ok(request) => TaskPost::JsonRpc(request),
                Err(e) => TaskPost::BadJsonRpc(e.to_string()),
            });
        }
        daedalus_contract::read::from_slice(&bytes)
            .map(|request| TaskPost::Contract(Box::new(request)))
            .map_err(ApiError::Unreadable)
    }
}

/// Whether `bytes` hold a JSON-RPC request: an object with a `"jsonrpc"` key. The key is looked
/// for first, so a contract body is parsed once.
fn is_jsonrpc(bytes: &[u8]) -> bool {
    memchr::memmem::find(bytes, b"\"jsonrpc\"").is_some()
        && serde_json::from_slice::<daedalus_contract::JsonRpcMarker>(bytes)
            .is_ok_and(|m| m.jsonrpc.is_some())
}

/// A body in a media type `POST /` does not take: a JSON-RPC request (one that fits the size
/// limit), or any request with `A2A-Version` (`a2a`), gets the binding's
/// `ContentTypeNotSupportedError`; anything else the contract's 415.
async fn refused_media_type(
    req: Request,
    state: &A2aFace,
    refused: ApiError,
    a2a: bool,
) -> Result<TaskPost, ApiError> {
    let limits = state.limits();
    let found = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("none")
        .to_owned();
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .or_else(|| http_body::Body::size_hint(req.body()).exact());
    if declared.is_none_or(|len| len > limits.max_body_bytes) {
        discard(req.into_body(), limits.body_read_timeout).await;
        if a2a {
            let id = daedalus_contract::JsonRpcId::Null;
            return Ok(TaskPost::JsonRpcMediaType { id, found });
        }
        return Err(refused);
    }
    let body = read_body(
        req.into_body(),
        declared.unwrap_or(0),
        limits.max_body_bytes,
        limits.body_read_timeout,
    )
    .await?;
    if !a2a && !is_jsonrpc(&body) {
        return Err(refused);
    }
    let id = serde_json::from_slice::<daedalus_contract::JsonRpcRequest>(&body)
        .ok()
        .and_then(|r| r.id)
        .unwrap_or(daedalus_contract::JsonRpcId::Null);
    Ok(TaskPost::JsonRpcMediaType { id, found })
}

/// The body, once its content type, size and arrival time passed the contract's rules.
pub(super) async fn checked_body(req: Request, state: &A2aFace) -> Result<Bytes, ApiError> {
    let limits = state.limits();
    if let Err(refused) = check_content_type(req.headers().get(CONTENT_TYPE)) {
        // Read and drop the body, as for a 413, so a pipelined request after it is read
        // from its start.
        discard(req.into_body(), limits.body_read_timeout).await;
        return Err(refused);
    }
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let body = req.into_body();
    if declared.is_some_and(|len| len > limits.max_body_bytes) {
        discard(body, limits.body_read_timeout).await;
        return Err(ApiError::PayloadTooLarge {
            limit: limits.max_body_bytes,
        });
    }
    read_body(
        body,
        declared.unwrap_or(0),
        limits.max_body_bytes,
        limits.body_read_timeout,
    )
    .await
}

/// Reads the whole body, refusing it once it passes `limit` bytes. `declared` (the
/// Content-Length, at most `limit`) sizes the buffer once instead of growing it by copies.
async fn read_body(
    body: Body,
    declared: u64,
    limit: u64,
    timeout: Duration,
) -> Result<Bytes, ApiError> {
    let limit_usize = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut body = body;
    let mut buf = BytesMut::with_capacity(usize::try_from(declared.min(limit)).unwrap_or(0));
    let read = async {
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(ApiError::BodyRead)?;
            if let Ok(data) = frame.into_data() {
                if buf.len() + data.len() > limit_usize {
                    return Err(ApiError::PayloadTooLarge { limit });
                }
                buf.extend_from_slice(&data);
            }
        }
        Ok(())
    };
    match tokio::time::timeout(timeout, read).await {
        Err(_) => Err(ApiError::BodyTimeout(timeout)),
        Ok(Err(e @ ApiError::PayloadTooLarge { .. })) => {
            discard(body, timeout).await;
            Err(e)
        }
        Ok(result) => result.map(|()| buf.freeze()),
    }
}

/// Reads and drops what is left of a refused body (up to [`DISCARD_CAP`] bytes), so that an
/// HTTP/1.1 client still sending it reads our 413 or 415 instead of a reset connection, and a
/// kept-alive connection stays in step. A body past the cap is left unread; the connection is
/// then closed (see `unread_body`).
async fn discard(mut body: Body, timeout: Duration) {
    let drain = async {
        let mut seen: usize = 0;
        while let Some(Ok(frame)) = body.frame().await {
            seen += frame.data_ref().map_or(0, Bytes::len);
            if seen > DISCARD_CAP {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(timeout, drain).await;
}

/// Accepts `application/json` and `application/a2a+json`, with an optional UTF-8 charset.
fn check_content_type(value: Option<&axum::http::HeaderValue>) -> Result<(), ApiError> {
    let refuse = |found: &str| ApiError::UnsupportedMediaType {
        found: format!("{found:?}"),
    };
    let Some(value) = value else {
        return Err(refuse("none"));
    };
    let text = value.to_str().map_err(|_| refuse("(not ASCII)"))?;
    let mut params = text.split(';');
    let essence = params.next().unwrap_or_default().trim();
    let json = essence.eq_ignore_ascii_case("application/json")
        || essence.eq_ignore_ascii_case("application/a2a+json");
    if !json {
        return Err(refuse(text));
    }
    for param in params {
        let (name, val) = param.split_once('=').unwrap_or((param, ""));
        let val = val.trim().trim_matches('"');
        if name.trim().eq_ignore_ascii_case("charset")
            && !(val.eq_ignore_ascii_case("utf-8") || val.eq_ignore_ascii_case("utf8"))
        {
            return Err(refuse(text));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::check_content_type;

    #[test]
    fn content_types() {
        let ok = [
            "application/json",
            "Application/JSON",
            "application/json; charset=utf-8",
            "application/json;charset=\"UTF-8\"",
            "application/a2a+json",
        ];
        for v in ok {
            assert!(
                check_content_type(Some(&HeaderValue::from_static(v))).is_ok(),
                "{v}"
            );
        }
        let bad = [
            "text/plain",
            "application/jsonx",
            "application/json; charset=latin1",
            "",
        ];
        for v in bad {
            assert!(
                check_content_type(Some(&HeaderValue::from_static(v))).is_err(),
                "{v}"
            );
        }
        assert!(check_content_type(None).is_err());
    }
}
