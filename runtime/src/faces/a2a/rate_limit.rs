//! The IETF `RateLimit-Policy` and `RateLimit` fields (draft-ietf-httpapi-ratelimit-headers)
//! on the HTTP answers of the task routes to a caller whose turns a budget holds: each
//! windowed limit by its scope kind and limit (never by whose), its quota and window, what
//! is left and when the window ends.

use axum::extract::{Request, State};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;

use super::A2aFace;
use crate::platform::identity::Caller;
use crate::services::turns::RateLimitItem;

/// `RateLimit-Policy`.
const POLICY_HEADER: &str = "ratelimit-policy";
/// `RateLimit`.
const LIMIT_HEADER: &str = "ratelimit";

/// Adds the fields to the answer when a budget holds the caller's turns.
pub(super) async fn add_fields(State(state): State<A2aFace>, req: Request, next: Next) -> Response {
    let caller = req.extensions().get::<Caller>().cloned();
    let mut response = next.run(req).await;
    let Some(caller) = caller else {
        return response;
    };
    let items = state.core().turns().rate_limits(&caller, &state.agent());
    if let Some((policy, limit)) = fields(&items) {
        let headers = response.headers_mut();
        headers.insert(POLICY_HEADER, policy);
        headers.insert(LIMIT_HEADER, limit);
    }
    response
}

/// The two fields' values, as structured-field lists (`None` with no item).
fn fields(items: &[RateLimitItem]) -> Option<(HeaderValue, HeaderValue)> {
    if items.is_empty() {
        return None;
    }
    let policy: Vec<String> = items
        .iter()
        .map(|i| format!("\"{}\";q={};w={}", i.policy, i.quota, i.window_secs))
        .collect();
    let limit: Vec<String> = items
        .iter()
        .map(|i| format!("\"{}\";r={};t={}", i.policy, i.remaining, i.reset_secs))
        .collect();
    Some((
        HeaderValue::from_str(&policy.join(", ")).ok()?,
        HeaderValue::from_str(&limit.join(", ")).ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_limit_is_a_list_member_named_by_scope_and_limit() {
        let items = [
            RateLimitItem {
                policy: "principal-turns_per_minute".into(),
                quota: 120,
                window_secs: 60,
                remaining: 119,
                reset_secs: 42,
            },
            RateLimitItem {
                policy: "tenant-tokens_per_day".into(),
                quota: 5_000_000,
                window_secs: 86_400,
                remaining: 4_000_000,
                reset_secs: 3_600,
            },
        ];
        let (policy, limit) = fields(&items).expect("fields");
        assert_eq!(
            policy,
            "\"principal-turns_per_minute\";q=120;w=60, \"tenant-tokens_per_day\";q=5000000;w=86400"
        );
        assert_eq!(
            limit,
            "\"principal-turns_per_minute\";r=119;t=42, \"tenant-tokens_per_day\";r=4000000;t=3600"
        );
        assert!(fields(&[]).is_none());
    }
}
