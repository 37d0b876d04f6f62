//! Parsing clap arguments with environment fallbacks, as a pure function of its inputs.
//!
//! clap's own `env` support reads the process environment while parsing. To keep parsing
//! testable, the `env` names declared on the arguments are kept for `--help`, but values are
//! looked up through a caller-supplied function: for every argument not given on the command
//! line, a value found in that environment is appended as `--flag=value` before the real parse.

use std::ffi::OsString;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, Parser};

/// Where an argument's value came from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvSourced {
    /// The argument id (the struct field name).
    pub id: String,
    /// The environment variable it came from.
    pub var: String,
}

/// Parses `args` (the first item is the program name) as a `C`, falling back to `env` for
/// arguments that declare an environment variable.
pub fn parse<C: Parser>(
    args: impl IntoIterator<Item = OsString>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(C, Vec<EnvSourced>), clap::Error> {
    let mut args: Vec<OsString> = args.into_iter().collect();
    let without_env = || C::command().mut_args(|a| a.env(None::<&str>));

    let first = match without_env().try_get_matches_from(&args) {
        Ok(m) => m,
        // Help is rendered from the full command so that it lists the variables.
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => {
            return Err(C::command().try_get_matches_from(&args).err().unwrap_or(e));
        }
        Err(e) => return Err(e),
    };
    let mut sourced = Vec::new();
    for arg in C::command().get_arguments() {
        let (Some(var), Some(long)) = (arg.get_env(), arg.get_long()) else {
            continue;
        };
        let id = arg.get_id().as_str();
        if first.value_source(id) == Some(ValueSource::CommandLine) {
            continue;
        }
        let var = var.to_string_lossy().into_owned();
        if let Some(value) = env(&var) {
            args.push(format!("--{long}={value}").into());
            sourced.push(EnvSourced {
                id: id.to_owned(),
                var,
            });
        }
    }
    let matches: ArgMatches = without_env().try_get_matches_from(&args)?;
    let parsed = C::from_arg_matches(&matches)?;
    Ok((parsed, sourced))
}

/// Why parsing failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad flags or values given on the command line, or `--help`/`--version`.
    #[error("{0}")]
    Clap(#[source] clap::Error),
    /// A bad value that came from the environment variable `var`.
    #[error("{var}: {message}")]
    Env { var: String, message: String },
}

/// [`parse`], with a bad value from the environment reported under the variable's name.
pub fn parse_naming_env<C: Parser>(
    args: impl IntoIterator<Item = OsString>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(C, Vec<EnvSourced>), CliError> {
    parse::<C>(args, env).map_err(|e| match invalid_env_var::<C>(&e, env) {
        Some(var) => CliError::Env {
            var,
            message: first_line(&e),
        },
        None => CliError::Clap(e),
    })
}

/// The environment variable whose value clap refused, if the refused value came from one.
fn invalid_env_var<C: CommandFactory>(
    e: &clap::Error,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<String> {
    use clap::error::ContextKind;
    let invalid = e.get(ContextKind::InvalidArg)?.to_string();
    let value = e.get(ContextKind::InvalidValue)?.to_string();
    C::command().get_arguments().find_map(|arg| {
        let long = arg.get_long()?;
        let var = arg.get_env()?.to_string_lossy().into_owned();
        let names_this =
            invalid.starts_with(&format!("--{long} ")) || invalid == format!("--{long}");
        (names_this && env(&var).as_deref() == Some(value.as_str())).then_some(var)
    })
}

fn first_line(e: &clap::Error) -> String {
    let text = e.to_string();
    text.lines()
        .next()
        .unwrap_or_default()
        .trim_start_matches("error: ")
        .to_owned()
}

/// A configuration that cannot be used. `Invalid` names the key at fault: the environment
/// variable the value came from, or the flag.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Bad flags or values, or a request for `--help`/`--version` (clap renders those).
    #[error("{0}")]
    Cli(#[source] clap::Error),
    /// A value that parsed but is not acceptable.
    #[error("{key}: {message}")]
    Invalid { key: String, message: String },
}

impl ConfigError {
    pub fn invalid(key: &str, message: impl Into<String>) -> Self {
        ConfigError::Invalid {
            key: key.to_owned(),
            message: message.into(),
        }
    }

    /// The key at fault, when there is one.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { key, .. } => Some(key),
            ConfigError::Cli(_) => None,
        }
    }
}

impl From<CliError> for ConfigError {
    fn from(e: CliError) -> Self {
        match e {
            CliError::Env { var, message } => ConfigError::Invalid { key: var, message },
            CliError::Clap(e) => ConfigError::Cli(e),
        }
    }
}

/// How to name an argument in an error: its environment variable if the value came from
/// there, else its flag.
pub fn key_for(sourced: &[EnvSourced], id: &str, flag: &str) -> String {
    sourced
        .iter()
        .find(|s| s.id == id)
        .map_or_else(|| flag.to_owned(), |s| s.var.clone())
}
