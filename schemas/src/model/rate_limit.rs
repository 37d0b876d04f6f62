//! Where a caller stands against one windowed limit of its budgets, as the IETF
//! `RateLimit-Policy` and `RateLimit` fields (draft-ietf-httpapi-ratelimit-headers) tell it.

/// One windowed limit that holds a caller's turns: named by scope kind and limit (never by
/// whose), its quota and window, and what is left and when the window ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimit {
    /// `<scope>-<limit>`, such as `tenant-tokens_per_minute`.
    pub policy: String,
    pub quota: u64,
    pub window_secs: u64,
    pub remaining: u64,
    pub reset_secs: u64,
}

/// The `RateLimit-Policy` and `RateLimit` fields' values for `limits`, as structured-field
/// lists with one member each (`None` with no limit).
pub fn rate_limit_fields(limits: &[RateLimit]) -> Option<(String, String)> {
    if limits.is_empty() {
        return None;
    }
    let policy: Vec<String> = limits
        .iter()
        .map(|l| format!("\"{}\";q={};w={}", l.policy, l.quota, l.window_secs))
        .collect();
    let limit: Vec<String> = limits
        .iter()
        .map(|l| format!("\"{}\";r={};t={}", l.policy, l.remaining, l.reset_secs))
        .collect();
    Some((policy.join(", "), limit.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_limit_is_a_list_member_named_by_scope_and_limit() {
        let limits = [
            RateLimit {
                policy: "principal-turns_per_minute".into(),
                quota: 120,
                window_secs: 60,
                remaining: 119,
                reset_secs: 42,
            },
            RateLimit {
                policy: "tenant-tokens_per_day".into(),
                quota: 5_000_000,
                window_secs: 86_400,
                remaining: 4_000_000,
                reset_secs: 3_600,
            },
        ];
        let (policy, limit) = rate_limit_fields(&limits).expect("fields");
        assert_eq!(
            policy,
            "\"principal-turns_per_minute\";q=120;w=60, \"tenant-tokens_per_day\";q=5000000;w=86400"
        );
        assert_eq!(
            limit,
            "\"principal-turns_per_minute\";r=119;t=42, \"tenant-tokens_per_day\";r=4000000;t=3600"
        );
        assert!(rate_limit_fields(&[]).is_none());
    }
}
