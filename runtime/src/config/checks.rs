//! The checks of the flags that stand alone: numeric bounds, `REPLICA_ID`, and the files
//! authentication reads at startup (read now, so `--check-config` refuses what startup would
//! stop on).

use std::time::Duration;

use super::flags::Cli;
use super::{ConfigError, auth};

/// The numeric flags' bounds: counts and bytes that must leave room for at least one of what
/// they bound, and the lease's range.
pub(super) fn check_bounds(
    cli: &Cli,
    key_of: &dyn Fn(&str, &str) -> String,
) -> Result<(), ConfigError> {
    first_out_of_bounds(&room_for_one(cli), key_of)?;
    first_out_of_bounds(&limits(cli), key_of)
}

/// One bound: whether the setting breaks it, the setting's key and flag, and what it must be.
type Bound<'a> = (bool, &'a str, &'a str, &'a str);

/// The first of `bounds` broken (they are told in order), as the error naming its setting.
fn first_out_of_bounds(
    bounds: &[Bound<'_>],
    key_of: &dyn Fn(&str, &str) -> String,
) -> Result<(), ConfigError> {
    match bounds.iter().find(|(broken, ..)| *broken) {
        Some((_, id, flag, why)) => Err(ConfigError::invalid(&key_of(id, flag), *why)),
        None => Ok(()),
    }
}

/// The room a turn or a session needs: memory, counts and timeouts above zero.
fn room_for_one(cli: &Cli) -> [Bound<'static>; 8] {
    const ONE_TURN: &str = "must leave room for at least one turn (more than zero)";
    const ONE_SESSION: &str = "must leave room for at least one session (more than zero)";
    [
        (
            cli.turn_memory == 0,
            "turn_memory",
            "--turn-memory",
            ONE_TURN,
        ),
        (
            cli.agent_turn_memory == Some(0),
            "agent_turn_memory",
            "--agent-turn-memory",
            ONE_TURN,
        ),
        (
            cli.max_concurrent_tasks == 0,
            "max_concurrent_tasks",
            "--max-concurrent-tasks",
            "must be at least 1",
        ),
        (
            cli.max_connections == 0,
            "max_connections",
            "--max-connections",
            "must be at least 1",
        ),
        (
            cli.max_mcp_sessions == 0,
            "max_mcp_sessions",
            "--max-mcp-sessions",
            ONE_SESSION,
        ),
        (
            cli.mcp_sessions_memory < crate::stores::mcp_sessions::SESSION_COST,
            "mcp_sessions_memory",
            "--mcp-sessions-memory",
            ONE_SESSION,
        ),
        (
            cli.mcp_handshake_timeout.is_zero(),
            "mcp_handshake_timeout",
            "--mcp-handshake-timeout",
            ONE_SESSION,
        ),
        (
            cli.mcp_session_idle.is_zero(),
            "mcp_session_idle",
            "--mcp-session-idle",
            ONE_SESSION,
        ),
    ]
}

/// The other limits: a body's bytes, the stored tasks, the budgets' metric names, the lease.
fn limits(cli: &Cli) -> [Bound<'static>; 4] {
    let metric_names = 1..=super::deployment::budgets::MAX_METRIC_NAMES;
    let lease = Duration::from_secs(1)..=Duration::from_mins(10);
    [
        (
            cli.max_body_size == 0,
            "max_body_size",
            "--max-body-size",
            "must be at least 1 byte",
        ),
        (
            cli.max_tasks == 0,
            "max_tasks",
            "--max-tasks",
            "must be > 0",
        ),
        (
            !metric_names.contains(&cli.budget_metric_names),
            "budget_metric_names",
            "--budget-metric-names",
            "must be between 1 and 10000",
        ),
        (
            !lease.contains(&cli.replica_lease),
            "replica_lease",
            "--replica-lease",
            "must be between 1s and 10m",
        ),
    ]
}

/// The longest `REPLICA_ID` taken: it names the replica in the shared store's keys (as a
/// token), in logs and in the message of a task whose replica was lost.
const MAX_REPLICA_ID_BYTES: usize = 253;

/// Why a `REPLICA_ID` is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum ReplicaIdError {
    #[error("is {0} bytes; at most {MAX_REPLICA_ID_BYTES} are taken")]
    TooLong(usize),
    #[error("holds a control character")]
    ControlCharacter,
}

pub(super) fn validate_replica_id(id: &str) -> Result<String, ReplicaIdError> {
    if id.len() > MAX_REPLICA_ID_BYTES {
        return Err(ReplicaIdError::TooLong(id.len()));
    }
    if id.chars().any(char::is_control) {
        return Err(ReplicaIdError::ControlCharacter);
    }
    Ok(id.to_owned())
}

/// The files authentication reads at startup, read now, so that `--check-config` refuses a key
/// file that is missing or malformed, or a JWKS file that cannot be read, naming the key.
pub(super) fn check_auth_files(
    auth: &auth::AuthPlan,
    cli: &Cli,
    key_of: &dyn Fn(&str, &str) -> String,
) -> Result<(), ConfigError> {
    if let Some(keys) = &auth.api_keys {
        crate::platform::identity::api_keys::ApiKeys::load(&keys.file).map_err(|e| {
            let key = if cli.auth_api_keys_file.is_some() {
                key_of("auth_api_keys_file", "--auth-api-keys-file")
            } else {
                "auth.api_keys_file".to_owned()
            };
            ConfigError::invalid(&key, e.to_string())
        })?;
    }
    if let Some(auth::TokenPlan {
        keys: auth::KeySource::File(file),
        ..
    }) = &auth.tokens
    {
        std::fs::File::open(file).map_err(|e| {
            let key = if cli.auth_jwks_file.is_some() {
                key_of("auth_jwks_file", "--auth-jwks-file")
            } else {
                "auth.jwks_file".to_owned()
            };
            ConfigError::invalid(&key, format!("cannot read {}: {e}", file.display()))
        })?;
    }
    Ok(())
}
