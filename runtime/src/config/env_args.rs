//! Parsing clap arguments with environment fallbacks, as a pure function of its inputs.
//!
//! clap's own `env` support reads the process environment while parsing. To keep parsing
//! testable, the `env` names declared on the arguments are kept for `--help`, but values are
//! looked up through a caller-supplied function: for every argument not given on the command
//! line, a value found in that environment is appended as `--flag=value` before the real parse.

use std::ffi::OsString;

use clap::parser::ValueSource;
use clap::{ArgMatches, Parser};

/// Where an argument's value came from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EnvSourced {
    /// The argument id (the struct field name).
    pub(crate) id: String,
    /// The environment variable it came from.
    pub(crate) var: String,
}

/// Parses `args` (the first item is the program name) as a `C`, falling back to `env` for
/// arguments that declare an environment variable.
pub(crate) fn parse<C: Parser>(
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
