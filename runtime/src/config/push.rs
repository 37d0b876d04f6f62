//! How push notifications are configured (`PUSH_*`): the settings, and the hosts a webhook
//! may be at although they are not public. The push service (`crate::services::push`) applies them.

use std::net::IpAddr;
use std::time::Duration;

/// How push notifications are configured (`PUSH_*`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PushSettings {
    /// Whether push notifications are served (`PUSH_NOTIFICATIONS`).
    pub enabled: bool,
    /// Hosts a webhook may be at although they are not public (`PUSH_ALLOW_HOSTS`).
    pub allow: AllowList,
    /// How long one POST to a webhook may take (`PUSH_TIMEOUT`).
    #[serde(serialize_with = "daedalus_contract::container::serialize_duration")]
    pub timeout: Duration,
    /// How long a delivery is tried again before it is given up (`PUSH_RETRY_FOR`).
    #[serde(serialize_with = "daedalus_contract::container::serialize_duration")]
    pub retry_for: Duration,
    /// Bytes that may wait for webhooks, in all (`PUSH_QUEUE_BYTES`).
    pub queue_bytes: usize,
}

impl Default for PushSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            allow: AllowList::default(),
            timeout: Duration::from_secs(10),
            retry_for: Duration::from_mins(5),
            queue_bytes: 64 << 20,
        }
    }
}

/// The hosts (names, addresses or `address/prefix` ranges) a webhook may be at although
/// they are not public (`PUSH_ALLOW_HOSTS`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct AllowList {
    names: Vec<String>,
    #[serde(serialize_with = "as_strings")]
    ranges: Vec<(IpAddr, u8)>,
}

fn as_strings<S: serde::Serializer>(ranges: &[(IpAddr, u8)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(ranges.iter().map(|(ip, prefix)| format!("{ip}/{prefix}")))
}

/// Why a `PUSH_ALLOW_HOSTS` entry is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllowListError {
    #[error("{0:?} is not an address range")]
    NotARange(String),
    #[error("{0:?} has no valid prefix length")]
    BadPrefix(String),
}

impl AllowList {
    /// Reads `PUSH_ALLOW_HOSTS` entries: host names, IP addresses, or CIDR ranges.
    pub fn parse(entries: &[String]) -> Result<Self, AllowListError> {
        let mut list = Self::default();
        for entry in entries.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
            if let Some((ip, prefix)) = entry.split_once('/') {
                let ip: IpAddr = ip
                    .parse()
                    .map_err(|_| AllowListError::NotARange(entry.to_owned()))?;
                let max = if ip.is_ipv4() { 32 } else { 128 };
                let prefix: u8 = prefix
                    .parse()
                    .ok()
                    .filter(|p| *p <= max)
                    .ok_or_else(|| AllowListError::BadPrefix(entry.to_owned()))?;
                list.ranges.push((ip, prefix));
            } else if let Ok(ip) = entry.trim_matches(['[', ']']).parse::<IpAddr>() {
                list.ranges.push((ip, if ip.is_ipv4() { 32 } else { 128 }));
            } else {
                list.names.push(entry.to_ascii_lowercase());
            }
        }
        Ok(list)
    }

    pub(crate) fn allows_name(&self, host: &str) -> bool {
        self.names.iter().any(|n| n.eq_ignore_ascii_case(host))
    }

    pub(crate) fn allows_address(&self, ip: IpAddr) -> bool {
        self.ranges
            .iter()
            .any(|(range, prefix)| in_range(ip, *range, *prefix))
    }
}

fn in_range(ip: IpAddr, range: IpAddr, prefix: u8) -> bool {
    match (canonical(ip), canonical(range)) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            u32::from(a) & mask == u32::from(b) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            u128::from(a) & mask == u128::from(b) & mask
        }
        _ => false,
    }
}

/// An IPv4 address spelled as IPv6 (`::ffff:10.0.0.1`) is that IPv4 address.
pub(crate) fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 @ IpAddr::V4(_) => v4,
    }
}
