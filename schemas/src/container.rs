//! The contract's container interface: its environment variables, their defaults, and the
//! duration format they use (`30s`, `2m`, `1h30m`, `500ms`, or a bare number of seconds).

use std::time::Duration;

/// Port of the A2A HTTP server.
pub const A2A_PORT_VAR: &str = "A2A_PORT";
pub const A2A_PORT_DEFAULT: u16 = 8080;
/// Writable workspace.
pub const WORK_DIR_VAR: &str = "WORK_DIR";
pub const WORK_DIR_DEFAULT: &str = "/workspace";
/// Time allowed for in-flight requests during shutdown.
pub const TERMINATION_GRACE_PERIOD_VAR: &str = "TERMINATION_GRACE_PERIOD";
pub const TERMINATION_GRACE_PERIOD_DEFAULT: Duration = Duration::from_secs(30);
/// Maximum time for the health check to succeed.
pub const STARTUP_TIMEOUT_VAR: &str = "STARTUP_TIMEOUT";
pub const STARTUP_TIMEOUT_DEFAULT: Duration = Duration::from_mins(1);

/// Paths of the contract's endpoints.
pub const HEALTH_PATH: &str = "/health";
pub const AGENT_CARD_PATH: &str = "/.well-known/agent-card.json";
pub const MANIFEST_PATH: &str = "/.well-known/runtime-contract.json";
pub const TASK_PATH: &str = "/";

/// Checks an agent name: `[A-Za-z0-9_-]{1,64}`, because it becomes a NATS subject token
/// (`agent.tasks.<agent>`) and a URL path segment.
pub fn validate_agent_name(name: &str) -> Result<(), String> {
    let ok_chars = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if name.is_empty() || name.len() > 64 || !ok_chars {
        return Err(format!(
            "{name:?} is not a valid agent name: use 1-64 of A-Z, a-z, 0-9, '_' and '-' \
             (it becomes a NATS subject token)"
        ));
    }
    Ok(())
}

/// Why a duration did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not a duration: use a number of seconds or units like 30s, 2m, 1h30m, 500ms")]
pub struct DurationError {
    pub input: String,
}

/// Parses the contract's duration format: `30s`, `2m`, `1h30m`, `500ms`, `1.5s`, or a bare
/// number of seconds (`30`).
pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    let err = || DurationError {
        input: input.to_owned(),
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(err());
    }
    if let Ok(secs) = s.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).map_err(|_| err());
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(err)?;
        if number_len == 0 {
            return Err(err());
        }
        let number: f64 = rest[..number_len].parse().map_err(|_| err())?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit_secs = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" | "sec" | "secs" => 1.0,
            "m" | "min" | "mins" => 60.0,
            "h" | "hr" | "hrs" => 3600.0,
            _ => return Err(err()),
        };
        rest = &rest[unit_len..];
        let part = Duration::try_from_secs_f64(number * unit_secs).map_err(|_| err())?;
        total = total.checked_add(part).ok_or_else(err)?;
    }
    Ok(total)
}

/// Serializes a duration as [`format_duration`] writes it (`#[serde(serialize_with = ...)]`).
pub fn serialize_duration<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_duration(*d))
}

/// Formats a duration the way [`parse_duration`] reads it back (`1m30s`, `250ms`).
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".to_owned();
    }
    if !ms.is_multiple_of(1000) {
        return format!("{ms}ms");
    }
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut out = String::new();
    for (value, unit) in [(h, 'h'), (m, 'm'), (s, 's')] {
        if value > 0 {
            out += &value.to_string();
            out.push(unit);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflowing_or_signed_durations_are_errors_not_panics() {
        for input in [
            "153722867280912929m1hrs6148914691236517205333ms1281023894007607h",
            "18446744073709551615s18446744073709551615s",
            "-1s",
            "-5",
            "NaN",
            "inf",
            "1e400",
            "1e400s",
            "..s",
        ] {
            assert!(parse_duration(input).is_err(), "{input}");
        }
    }

    #[test]
    fn contract_spellings_parse() {
        let cases = [
            ("30s", 30_000),
            ("2m", 120_000),
            ("30", 30_000),
            ("0", 0),
            ("1h30m", 5_400_000),
            ("500ms", 500),
            ("1.5s", 1_500),
            (" 45s ", 45_000),
            ("1m30s", 90_000),
        ];
        for (input, ms) in cases {
            assert_eq!(
                parse_duration(input),
                Ok(Duration::from_millis(ms)),
                "{input}"
            );
        }
    }

    #[test]
    fn nonsense_is_refused() {
        for input in ["", "s", "30x", "-5", "m30", "1.2.3s", "thirty", "30 s"] {
            assert!(parse_duration(input).is_err(), "{input:?} parsed");
        }
    }

    #[test]
    fn format_reads_back() {
        for ms in [0, 250, 1_000, 59_000, 90_000, 3_600_000, 5_400_500] {
            let d = Duration::from_millis(ms);
            assert_eq!(
                parse_duration(&format_duration(d)),
                Ok(d),
                "{}",
                format_duration(d)
            );
        }
    }
}
