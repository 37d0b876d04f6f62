//! The two text formats `/metrics` answers in: OpenMetrics (what [`super::Metrics::render`]
//! writes) when the scraper's `Accept` asks for it, else the Prometheus text format 0.0.4 made
//! from it (what Pallas served).

/// The content type of [`Metrics::render`].
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The content type of [`prometheus_text`]: what Pallas serves, and the default.
pub const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Whether a scraper's `Accept` asks for OpenMetrics (Prometheus does when it can read it).
pub fn wants_openmetrics(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| {
        a.split(',').any(|range| {
            let mut params = range.split(';');
            let kind = params.next().unwrap_or_default().trim();
            // A range weighted `q=0` is one the scraper refuses.
            let refused = params.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            kind.eq_ignore_ascii_case("application/openmetrics-text") && !refused
        })
    })
}

/// The Prometheus text format 0.0.4 of an OpenMetrics exposition: a counter's family is named
/// with its `_total`, as its samples are; no `# UNIT` lines and no `# EOF`.
pub fn prometheus_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len() + 64 * counters.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let family = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            counters
                .contains(name)
                .then(|| format!("{prefix}{name}_total {tail}"))
        });
        match family {
            Some(renamed) => out.push_str(renamed.trim_end()),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}
