//! The SSRF guard of webhook deliveries: a webhook must be an `http(s)` URL whose host is a
//! public address, unless `PUSH_ALLOW_HOSTS` names it.
//!
//! Refused: loopback, private (RFC 1918, IPv6 unique-local), link-local (and with it cloud
//! metadata at 169.254.169.254), shared (100.64/10), unspecified, multicast, broadcast and
//! documentation ranges, IPv6 outside global unicast (`2000::/3`: IPv4-compatible `::/96`,
//! site-local and every reserved range), IETF special-purpose blocks (`2001::/23`: Teredo,
//! benchmarking, ORCHID), and IPv4 addresses spelled as IPv6 (mapped `::ffff:0:0/96`, NAT64
//! and 6to4 decide by the IPv4 address they carry). A host name is resolved once per
//! delivery, by the HTTP client's own resolver ([`GuardedResolver`]), and every address it
//! answers is checked before a connection is made to one of them: a name that resolves to
//! a private address (DNS rebinding) is refused whatever it resolved to before. The client
//! follows no redirect and uses no proxy, so neither can lead elsewhere.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use crate::config::push::{AllowList, canonical};

/// Why a webhook URL is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    #[error("the webhook URL does not parse: {0}")]
    Unparsable(String),
    #[error("the webhook URL must be http or https, not {0}")]
    Scheme(String),
    #[error("the webhook URL must not carry a user name or password")]
    Userinfo,
    #[error("the webhook URL has no host")]
    NoHost,
    #[error(
        "the webhook host {host} is a {kind} address ({address}); PUSH_ALLOW_HOSTS must name it to be called"
    )]
    Private {
        host: String,
        address: IpAddr,
        kind: &'static str,
    },
    #[error("the webhook host {0} did not resolve to any address")]
    Unresolved(String),
}

/// What kind of non-public address `ip` is, if it is one.
pub fn non_public(ip: IpAddr) -> Option<&'static str> {
    match canonical(ip) {
        IpAddr::V4(v4) => non_public_v4(v4),
        IpAddr::V6(v6) => non_public_v6(v6),
    }
}

fn non_public_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_private() {
        Some("private")
    } else if ip.is_link_local() {
        Some("link-local (cloud metadata lives here)")
    } else if a == 100 && (64..128).contains(&b) {
        Some("shared (carrier-grade NAT)")
    } else if ip.is_unspecified() || a == 0 {
        Some("unspecified")
    } else if ip.is_multicast() || ip.is_broadcast() || a >= 240 {
        Some("multicast or reserved")
    } else if ip.is_documentation() || (a == 198 && (b == 18 || b == 19)) {
        Some("documentation or benchmarking")
    } else {
        None
    }
}

fn non_public_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    let embedded_v4 =
        |high: u16, low: u16| Ipv4Addr::from((u32::from(high) << 16) | u32::from(low));
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_unspecified() {
        Some("unspecified")
    } else if s[..6] == [0; 6] {
        // ::/96, IPv4-compatible (deprecated, RFC 4291): `::127.0.0.1` is `::7f00:1`.
        Some("reserved (IPv4-compatible, deprecated)")
    } else if s[0] == 0x0064 && s[1] == 0xff9b && s[2..6] == [0; 4] {
        // NAT64 (64:ff9b::/96): the IPv4 address in its last 32 bits decides.
        non_public_v4(embedded_v4(s[6], s[7]))
    } else if s[0] == 0x0064 && s[1] == 0xff9b && s[2] == 0x0001 {
        Some("private (local-use NAT64)")
    } else if s[0] & 0xfe00 == 0xfc00 {
        Some("private (unique local)")
    } else if s[0] & 0xffc0 == 0xfe80 {
        Some("link-local")
    } else if s[0] & 0xffc0 == 0xfec0 {
        Some("private (site-local, deprecated)")
    } else if ip.is_multicast() {
        Some("multicast")
    } else if s[0] & 0xe000 != 0x2000 {
        // Only 2000::/3 is global unicast; the rest is reserved or unassigned.
        Some("reserved")
    } else if (s[0] == 0x2001 && s[1] == 0x0db8) || s[0] & 0xfff0 == 0x3ff0 {
        Some("documentation")
    } else if s[0] == 0x2001 && s[1] < 0x0200 {
        // 2001::/23, IETF protocol assignments: Teredo, benchmarking, ORCHID, AS112 ...
        Some("special-purpose (IETF protocol assignment)")
    } else if s[0] == 0x2002 {
        // 6to4 (deprecated, RFC 7526): the IPv4 address in bits 16..48 decides.
        non_public_v4(embedded_v4(s[1], s[2]))
    } else {
        None
    }
}

/// Checks a webhook URL before it is stored or called: its form, and its host when that is an
/// address (a name is checked when it resolves, at each delivery).
pub fn check_url(raw: &str, allow: &AllowList) -> Result<reqwest::Url, GuardError> {
    let url = reqwest::Url::parse(raw).map_err(|e| GuardError::Unparsable(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(GuardError::Scheme(url.scheme().to_owned()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(GuardError::Userinfo);
    }
    let address = match url.host() {
        None => return Err(GuardError::NoHost),
        Some(url::Host::Domain(_)) => return Ok(url),
        Some(url::Host::Ipv4(v4)) => IpAddr::V4(v4),
        Some(url::Host::Ipv6(v6)) => IpAddr::V6(v6),
    };
    let host = url.host_str().unwrap_or_default().to_owned();
    check_address(&host, address, allow)?;
    Ok(url)
}

fn check_address(host: &str, address: IpAddr, allow: &AllowList) -> Result<(), GuardError> {
    match non_public(address) {
        Some(kind) if !allow.allows_name(host) && !allow.allows_address(address) => {
            Err(GuardError::Private {
                host: host.to_owned(),
                address,
                kind,
            })
        }
        _ => Ok(()),
    }
}

/// The delivery client's resolver: the system's, then every address checked (see the module).
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    allow: Arc<AllowList>,
}

impl GuardedResolver {
    pub fn new(allow: Arc<AllowList>) -> Self {
        Self { allow }
    }

    /// The addresses of `host` a delivery may connect to.
    pub async fn resolve_checked(&self, host: &str) -> Result<Vec<SocketAddr>, GuardError> {
        let found: Vec<SocketAddr> = tokio::net::lookup_host((host, 0))
            .await
            .map_err(|_| GuardError::Unresolved(host.to_owned()))?
            .collect();
        if found.is_empty() {
            return Err(GuardError::Unresolved(host.to_owned()));
        }
        for address in &found {
            check_address(host, address.ip(), &self.allow)?;
        }
        Ok(found)
    }
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let this = self.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found = this.resolve_checked(&host).await?;
            let addrs: reqwest::dns::Addrs = Box::new(found.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(entries: &[&str]) -> AllowList {
        AllowList::parse(&entries.iter().map(|e| (*e).to_owned()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn public_addresses_pass_and_every_private_kind_is_refused() {
        let none = AllowList::default();
        for ok in [
            "https://hooks.example.com/a2a?x=1",
            "http://93.184.216.34:8080/hook",
            "http://[2606:4700::1111]/hook",
            "http://[64:ff9b::5db8:d822]/hook",
            "http://[2002:5db8:d822::1]/hook",
        ] {
            assert!(check_url(ok, &none).is_ok(), "{ok}");
        }
        for refused in [
            "http://127.0.0.1:9/hook",
            "http://10.1.2.3/",
            "http://172.16.0.1/",
            "http://192.168.1.1/",
            "http://169.254.169.254/latest/meta-data/",
            "http://100.64.0.1/",
            "http://0.0.0.0/",
            "http://[::1]/",
            "http://[fd00::1]/",
            "http://[fe80::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://[64:ff9b::a00:1]/",
            "http://224.0.0.1/",
            // IPv4-compatible IPv6 (::/96, deprecated): `[::7f00:1]` is 127.0.0.1.
            "http://[::127.0.0.1]:8080/",
            "http://[::7f00:1]/",
            "http://[::a00:1]/",
            "http://[::8.8.8.8]/",
            "http://[64:ff9b:1::1]/",
            "http://[fec0::1]/",
            "http://[100::1]/",
            "http://[2001:db8::1]/",
            "http://[3fff::1]/",
            "http://[2001::1]/",
            "http://[2001:2::1]/",
            "http://[2002:7f00:1::]/",
            "http://[2002:a00:1::1]/",
            "http://[ff02::1]/",
            "http://[4000::1]/",
        ] {
            assert!(
                matches!(check_url(refused, &none), Err(GuardError::Private { .. })),
                "{refused}"
            );
        }
        assert!(matches!(
            check_url("file:///etc/passwd", &none),
            Err(GuardError::Scheme(_))
        ));
        assert!(matches!(
            check_url("http://user:pw@example.com/", &none),
            Err(GuardError::Userinfo)
        ));
        assert!(matches!(
            check_url("not a url", &none),
            Err(GuardError::Unparsable(_))
        ));
    }

    #[test]
    fn the_allow_list_lets_named_hosts_addresses_and_ranges_through() {
        let list = allow(&["127.0.0.1", "10.0.0.0/8", "hooks.internal", "[::1]"]);
        for ok in [
            "http://127.0.0.1:9/hook",
            "http://10.200.0.7/",
            "http://[::1]:80/",
        ] {
            assert!(check_url(ok, &list).is_ok(), "{ok}");
        }
        assert!(check_url("http://127.0.0.2/", &list).is_err());
        assert!(check_url("http://192.168.0.1/", &list).is_err());
        assert!(AllowList::parse(&["10.0.0.0/33".to_owned()]).is_err());
    }

    #[tokio::test]
    async fn a_name_is_checked_where_it_resolves() {
        let none = GuardedResolver::new(Arc::new(AllowList::default()));
        // `localhost` resolves to loopback: refused, as a name pointing at a private address
        // (DNS rebinding) would be.
        assert!(matches!(
            none.resolve_checked("localhost").await,
            Err(GuardError::Private { .. })
        ));
        let named = GuardedResolver::new(Arc::new(allow(&["localhost"])));
        assert!(named.resolve_checked("localhost").await.is_ok());
        let by_address = GuardedResolver::new(Arc::new(allow(&["127.0.0.0/8", "::1"])));
        assert!(by_address.resolve_checked("localhost").await.is_ok());
    }
}
