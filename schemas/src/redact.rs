//! URLs as they may be shown: in logs, error messages, `/healthz`, `--check-config` output,
//! tool results and failed Tasks. Credentials in the userinfo (`user:pass@`) and anything in
//! the query string or fragment (API keys, signed tokens) are masked.

/// `url` with its userinfo, query and fragment masked: `https://***@host/path?***`.
/// A comma-separated list (NATS server URLs) is masked item by item. Text that is not a URL
/// comes back unchanged.
pub fn redact_url(url: &str) -> String {
    if url.contains(',') {
        return url.split(',').map(redact_one).collect::<Vec<_>>().join(",");
    }
    redact_one(url)
}

/// `text` (an error message, a log line) with every URL in it masked as [`redact_url`] does.
/// A URL starts at its scheme and ends at whitespace, a quote, a bracket or a comma.
pub fn redact_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(sep) = rest.find("://") {
        let start = rest[..sep]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-')))
            .map_or(0, |i| i + 1);
        let end = rest[sep + 3..]
            .find(|c: char| {
                c.is_whitespace()
                    || matches!(
                        c,
                        '"' | '\'' | '<' | '>' | '(' | ')' | '[' | ']' | '{' | '}' | ','
                    )
            })
            .map_or(rest.len(), |i| sep + 3 + i);
        out.push_str(&rest[..start]);
        out.push_str(&redact_one(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

fn redact_one(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(i) => url.split_at(i + 3),
        None => ("", url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let mut out = String::with_capacity(url.len());
    out.push_str(scheme);
    match authority.rfind('@') {
        Some(at) => {
            out.push_str("***");
            out.push_str(&authority[at..]);
        }
        None => out.push_str(authority),
    }
    match tail.find(['?', '#']) {
        Some(q) => {
            out.push_str(&tail[..q]);
            out.push_str(&tail[q..=q]);
            out.push_str("***");
        }
        None => out.push_str(tail),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{redact_text, redact_url};

    #[test]
    fn urls_inside_messages_are_masked() {
        let text = "error sending request for url (https://u:hunter2@mcp.example.com/mcp?key=hunter2): connection refused; also http://h/x?t=hunter2, done";
        let shown = redact_text(text);
        assert!(!shown.contains("hunter2"), "{shown}");
        assert_eq!(
            shown,
            "error sending request for url (https://***@mcp.example.com/mcp?***): connection refused; also http://h/x?***, done"
        );
        assert_eq!(redact_text("no urls here"), "no urls here");
        assert_eq!(redact_text("://"), "://");
    }

    #[test]
    fn masks_userinfo_query_and_fragment() {
        let cases = [
            ("nats://127.0.0.1:4222", "nats://127.0.0.1:4222"),
            ("nats://user:pass@host:4222", "nats://***@host:4222"),
            ("nats://tok@host", "nats://***@host"),
            (
                "https://a:b@mcp.example.com/mcp?api_key=s3cret",
                "https://***@mcp.example.com/mcp?***",
            ),
            ("https://h/p?key=1#frag", "https://h/p?***"),
            ("https://h/p#token=x", "https://h/p#***"),
            ("http://h/p/a@b", "http://h/p/a@b"),
            (
                "nats://u:p@a:4222,nats://u:p@b:4222",
                "nats://***@a:4222,nats://***@b:4222",
            ),
            ("u:p@host:4222", "***@host:4222"),
            ("", ""),
        ];
        for (url, shown) in cases {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }

    #[test]
    fn no_secret_survives() {
        for url in [
            "https://user:hunter2@h/x?sig=hunter2",
            "nats://hunter2@h,nats://x:hunter2@h2",
            "http://h?hunter2",
            "http://h/#hunter2",
        ] {
            assert!(!redact_url(url).contains("hunter2"), "{url}");
        }
    }
}
