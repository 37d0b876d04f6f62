//! An error and its sources on one line, for a log field or an error body.

/// `e`, then each of its sources, joined by `: `.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("inner")]
    struct Inner;

    #[test]
    fn every_source_is_on_the_line_in_order() {
        assert_eq!(error_chain(&Outer(Inner)), "outer: inner");
        assert_eq!(error_chain(&Inner), "inner");
    }
}
