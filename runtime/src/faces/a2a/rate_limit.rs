//! The IETF `RateLimit-Policy` and `RateLimit` fields (draft-ietf-httpapi-ratelimit-headers)
//! on the HTTP answers of the task routes to a caller whose turns a budget holds: each
//! windowed limit by its scope kind and limit (never by whose), its quota and window, what
//! is left and when the window ends. A budget's refusal carries where the caller stood as it
//! refused, and its writer puts that on the answer; any other answer gets where the caller
//! stands as it leaves, from the turn service.

use axum::extract::{Request, State};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use daedalus_contract::{RateLimit, rate_limit_fields};

use super::A2aFace;
use crate::platform::identity::Caller;

/// `RateLimit-Policy`.
const POLICY_HEADER: &str = "ratelimit-policy";
/// `RateLimit`.
const LIMIT_HEADER: &str = "ratelimit";

/// Marks an answer whose fields were written with it (a budget's refusal).
#[derive(Debug, Clone, Copy)]
struct Written;

/// Adds the fields to an answer that did not bring its own, when a budget holds the caller's
/// turns.
pub(super) async fn add_fields(State(state): State<A2aFace>, req: Request, next: Next) -> Response {
    let caller = req.extensions().get::<Caller>().cloned();
    let mut response = next.run(req).await;
    let Some(caller) = caller else {
        return response;
    };
    if response.extensions().get::<Written>().is_none() {
        let limits = state.core().turns().rate_limits(&caller, &state.agent());
        write(&mut response, &limits);
    }
    response
}

/// Writes the fields of `limits` on `response` (none with no limit), which then keeps them.
pub(super) fn write(response: &mut Response, limits: &[RateLimit]) {
    response.extensions_mut().insert(Written);
    let Some((policy, limit)) = rate_limit_fields(limits) else {
        return;
    };
    if let (Ok(policy), Ok(limit)) = (
        HeaderValue::from_str(&policy),
        HeaderValue::from_str(&limit),
    ) {
        let headers = response.headers_mut();
        headers.insert(POLICY_HEADER, policy);
        headers.insert(LIMIT_HEADER, limit);
    }
}
