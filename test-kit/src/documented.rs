//! Every documented setting, tried as a user would: the variables of the configuration tables
//! in a binary's documentation pages (`docs/`), each run through the binary's `--check-config` with its documented
//! default and values (accepted, and shown in the printed configuration) and with a value
//! outside them (refused, exit 2, naming the variable).
//!
//! A binary's test lists its settings as [`Setting`]s; [`check_every_setting`] then also holds
//! the list to the pages and to the binary's `--help` (every flag's `[env: NAME]`), so a flag
//! added without a row in the documentation, or a row without a test, fails.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// A documentation page: its path in the repository and its text.
#[derive(Debug, Clone, Copy)]
pub struct Page {
    /// Where it is (`docs/running.md`), for the failures' wording.
    pub path: &'static str,
    /// Its Markdown.
    pub text: &'static str,
}

/// One row of a configuration table (`| variable | default | meaning |`).
#[derive(Debug, Clone)]
pub struct Row {
    /// The variables the row documents (the backticked `UPPER_CASE` names of its first cell).
    pub vars: Vec<String>,
    /// The default cell.
    pub default: String,
    /// The whole row.
    pub text: String,
}

/// The rows of every `| variable | default | meaning |` table in `pages`, in order.
pub fn configuration_rows(pages: &[Page]) -> Vec<Row> {
    pages.iter().flat_map(|page| page_rows(page.text)).collect()
}

fn page_rows(text: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut in_table = false;
    for line in text.lines() {
        if !line.starts_with('|') {
            in_table = false;
            continue;
        }
        let cells = cells(line);
        if cells.first().map(String::as_str) == Some("variable") {
            in_table = true;
            continue;
        }
        if !in_table || cells.len() < 3 || cells[0].starts_with("---") {
            continue;
        }
        let vars = backticked(&cells[0])
            .into_iter()
            .filter(|name| is_variable(name))
            .collect();
        rows.push(Row {
            vars,
            default: cells[1].clone(),
            text: line.to_owned(),
        });
    }
    rows
}

/// The cells of a table row: split at each `|` outside backticks, trimmed.
fn cells(line: &str) -> Vec<String> {
    let mut cells = vec![String::new()];
    let mut quoted = false;
    for c in line
        .trim()
        .trim_start_matches('|')
        .trim_end_matches('|')
        .chars()
    {
        if c == '|' && !quoted {
            cells.push(String::new());
            continue;
        }
        if c == '`' {
            quoted = !quoted;
        }
        if let Some(cell) = cells.last_mut() {
            cell.push(c);
        }
    }
    cells.into_iter().map(|c| c.trim().to_owned()).collect()
}

/// The backticked spans of `text`.
pub fn backticked(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

fn is_variable(name: &str) -> bool {
    name.len() > 1
        && name.starts_with(|c: char| c.is_ascii_uppercase())
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// The default `row` documents for `var`, when it is one literal (`` `30s` ``, or one of
/// `` `1s` / `1m` `` for a row of two variables).
pub fn literal_default(row: &Row, var: &str) -> Option<String> {
    let index = row.vars.iter().position(|v| v == var)?;
    let parts: Vec<&str> = if row.vars.len() == 1 {
        vec![row.default.as_str()]
    } else {
        row.default
            .split(" / ")
            .flat_map(|part| part.split(", "))
            .map(str::trim)
            .collect()
    };
    // Aliases of one setting share one default.
    let cell = match parts.as_slice() {
        [only] => *only,
        parts if parts.len() == row.vars.len() => parts[index],
        _ => return None,
    };
    // Exactly one literal, perhaps with a note in parentheses: `720h` (30 days). Not a
    // condition (`./agents.yaml` if present) or an alternative (`/workspace`, else ...).
    let rest = cell.strip_prefix('`')?;
    let (literal, after) = rest.split_once('`')?;
    let after = after.trim();
    let plain = after.is_empty() || (after.starts_with('(') && after.ends_with(')'));
    (plain && !literal.contains(['<', '$']) && !is_variable(literal)).then(|| literal.to_owned())
}

/// The `NAME`s of `[env: NAME=…]` in a binary's `--help`.
pub fn help_variables(binary: &Path) -> BTreeSet<String> {
    let output = Command::new(binary)
        .arg("--help")
        .env_clear()
        .output()
        .expect("the binary runs");
    let help = String::from_utf8_lossy(&output.stdout);
    help.split("[env: ")
        .skip(1)
        .filter_map(|rest| rest.split(['=', ']']).next())
        .map(str::to_owned)
        .collect()
}

/// What `--check-config` made of a run.
#[derive(Debug)]
pub enum Checked {
    /// Exit 0: the printed configuration.
    Accepted(Value),
    /// Exit 2: what it said on stderr.
    Refused(String),
}

/// A documented setting and what the test tries it with.
#[derive(Debug, Clone)]
pub struct Setting {
    pub var: &'static str,
    /// Where `--check-config` shows it (a JSON pointer).
    pub shown_at: &'static str,
    /// What is shown there when the variable is unset (a subset: objects need only hold the
    /// keys given).
    pub default: Option<Value>,
    /// Documented values, each of which the documented row names: (value, what is shown).
    pub choices: Vec<(String, Value)>,
    /// Further values taken: (value, what is shown).
    pub examples: Vec<(String, Value)>,
    /// Values refused (exit 2, the variable named).
    pub refused: Vec<String>,
    /// Values refused when the other variables it needs ([`Setting::with`]) are not set.
    pub refused_alone: Vec<String>,
    /// Other variables every run of this setting needs.
    pub with: Vec<(&'static str, String)>,
    /// Why no value can be refused (free text), when none is listed.
    pub any_value: Option<&'static str>,
}

impl Setting {
    /// The setting `var`, shown at `shown_at`.
    pub fn new(var: &'static str, shown_at: &'static str) -> Self {
        Self {
            var,
            shown_at,
            default: None,
            choices: Vec::new(),
            examples: Vec::new(),
            refused: Vec::new(),
            refused_alone: Vec::new(),
            with: Vec::new(),
            any_value: None,
        }
    }

    /// Unset, it is shown as `shown`.
    #[must_use]
    pub fn by_default(mut self, shown: Value) -> Self {
        self.default = Some(shown);
        self
    }

    /// `value`, which the documentation names, is shown as `shown`.
    #[must_use]
    pub fn choice(mut self, value: &str, shown: Value) -> Self {
        self.choices.push((value.to_owned(), shown));
        self
    }

    /// `value` is taken and shown as `shown`.
    #[must_use]
    pub fn takes(mut self, value: &str, shown: Value) -> Self {
        self.examples.push((value.to_owned(), shown));
        self
    }

    /// `value` is refused, naming the variable.
    #[must_use]
    pub fn refuses(mut self, value: &str) -> Self {
        self.refused.push(value.to_owned());
        self
    }

    /// `value` is refused, naming the variable, when the variables it needs are not set.
    #[must_use]
    pub fn refuses_alone(mut self, value: &str) -> Self {
        self.refused_alone.push(value.to_owned());
        self
    }

    /// Every run also sets `var` to `value`.
    #[must_use]
    pub fn with(mut self, var: &'static str, value: &str) -> Self {
        self.with.push((var, value.to_owned()));
        self
    }

    /// Any value is taken (free text), for the reason given.
    #[must_use]
    pub fn any_value(mut self, why: &'static str) -> Self {
        self.any_value = Some(why);
        self
    }
}

/// How to run a binary's `--check-config`.
#[derive(Debug, Clone)]
pub struct Binary {
    pub path: PathBuf,
    /// Variables every run sets (the proxy needs its agent).
    pub base_env: Vec<(&'static str, String)>,
    /// The working directory of every run (`{dir}` in values stands for it).
    pub dir: PathBuf,
    /// Variables read outside the flags (by the deployment file's loader), documented in the
    /// documentation but absent from `--help`.
    pub not_in_help: &'static [&'static str],
}

impl Binary {
    /// `--check-config` with `env` (and the base variables), nothing else of the environment.
    pub fn check(&self, env: &[(&str, String)]) -> Checked {
        let mut command = Command::new(&self.path);
        command
            .arg("--check-config")
            .env_clear()
            .current_dir(&self.dir);
        for (var, value) in self.base_env.iter().chain(env.iter()) {
            command.env(var, value.replace("{dir}", &self.dir.to_string_lossy()));
        }
        let output = command.output().expect("the binary runs");
        match output.status.code() {
            Some(0) => {
                Checked::Accepted(serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
                    panic!(
                        "--check-config prints JSON ({e}): {}",
                        String::from_utf8_lossy(&output.stdout)
                    )
                }))
            }
            Some(2) => Checked::Refused(String::from_utf8_lossy(&output.stderr).into_owned()),
            other => panic!(
                "--check-config with {env:?} exited {other:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            ),
        }
    }
}

/// Whether `shown` holds `expected`: equal, or for objects, every key of `expected` held.
pub fn holds(shown: &Value, expected: &Value) -> bool {
    match (shown, expected) {
        (Value::Object(shown), Value::Object(expected)) => expected
            .iter()
            .all(|(k, v)| shown.get(k).is_some_and(|s| holds(s, v))),
        _ => shown == expected,
    }
}

/// Checks every setting (see the module) and answers what failed, one line each.
pub fn check_every_setting(binary: &Binary, pages: &[Page], settings: &[Setting]) -> Vec<String> {
    let mut failures = Vec::new();
    let rows = configuration_rows(pages);
    let where_documented = pages.iter().map(|p| p.path).collect::<Vec<_>>().join(", ");
    let documented: BTreeSet<String> = rows.iter().flat_map(|r| r.vars.clone()).collect();
    let tested: BTreeSet<String> = settings.iter().map(|s| s.var.to_owned()).collect();
    let flags = help_variables(&binary.path);
    for var in flags.difference(&documented) {
        failures.push(format!(
            "{var}: a flag reads it (--help), but no configuration table documents it ({where_documented})"
        ));
    }
    for var in documented.difference(&tested) {
        failures.push(format!(
            "{var}: documented, but the test tries no value of it"
        ));
    }
    for var in tested.difference(&documented) {
        failures.push(format!(
            "{var}: tested, but no configuration table documents it ({where_documented})"
        ));
    }
    for var in documented.difference(&flags) {
        if !binary.not_in_help.contains(&var.as_str()) {
            failures.push(format!(
                "{var}: documented, but no flag reads it (--help lists no [env: {var}])"
            ));
        }
    }
    if let Checked::Refused(why) = binary.check(&[]) {
        failures.push(format!("the defaults are refused: {why}"));
        return failures;
    }
    for setting in settings {
        let Some(row) = rows
            .iter()
            .find(|r| r.vars.iter().any(|v| v == setting.var))
        else {
            continue;
        };
        failures.extend(check_setting(binary, setting, row));
    }
    failures
}

fn check_setting(binary: &Binary, setting: &Setting, row: &Row) -> Vec<String> {
    // The default as the test states it, and as the documentation writes it (with only the
    // settings this one needs, when those alone are taken).
    let context: Vec<(&str, String)> = setting.with.iter().map(|(k, v)| (*k, v.clone())).collect();
    let default_shown = match binary.check(&context) {
        Checked::Accepted(config) => shown_in(setting, &config),
        Checked::Refused(_) if setting.default.is_none() => None,
        Checked::Refused(why) => {
            return vec![format!(
                "{}: the settings it needs are refused: {why}",
                setting.var
            )];
        }
    };
    let mut failures = check_default(binary, setting, row, default_shown.as_ref());
    failures.extend(check_values(binary, setting, row));
    failures.extend(check_refusals(binary, setting));
    failures
}

/// What `setting` shows in a `--check-config` answer.
fn shown_in(setting: &Setting, config: &Value) -> Option<Value> {
    config.pointer(setting.shown_at).cloned()
}

/// `--check-config` with `setting` set to `value`, and the settings it needs.
fn run_with(binary: &Binary, setting: &Setting, value: &str) -> Checked {
    let mut env: Vec<(&str, String)> = setting.with.iter().map(|(k, v)| (*k, v.clone())).collect();
    env.push((setting.var, value.to_owned()));
    binary.check(&env)
}

/// The default: shown as the test states it, and the documented default shows the same.
fn check_default(
    binary: &Binary,
    setting: &Setting,
    row: &Row,
    default_shown: Option<&Value>,
) -> Vec<String> {
    let var = setting.var;
    let mut failures = Vec::new();
    match (&setting.default, default_shown) {
        (Some(expected), Some(shown)) if !holds(shown, expected) => failures.push(format!(
            "{var}: unset, {} shows {shown}, not {expected}",
            setting.shown_at
        )),
        (Some(_), None) => failures.push(format!(
            "{var}: --check-config shows nothing at {}",
            setting.shown_at
        )),
        _ => {}
    }
    if let (Some(literal), Some(_)) = (literal_default(row, var), default_shown) {
        match run_with(binary, setting, &literal) {
            Checked::Accepted(config) if shown_in(setting, &config).as_ref() == default_shown => {}
            Checked::Accepted(config) => failures.push(format!(
                "{var}={literal} (the documented default) shows {:?}, unset shows {default_shown:?}",
                shown_in(setting, &config)
            )),
            Checked::Refused(why) => failures.push(format!(
                "{var}={literal} (the documented default) is refused: {why}"
            )),
        }
    }
    failures
}

/// The choices the row names, and each choice and example shown as the test expects.
fn check_values(binary: &Binary, setting: &Setting, row: &Row) -> Vec<String> {
    let var = setting.var;
    let mut failures = Vec::new();
    let named = backticked(&row.text);
    for (value, _) in &setting.choices {
        if !named.iter().any(|n| n == value) {
            failures.push(format!(
                "{var}: the documented row does not name the value `{value}`"
            ));
        }
    }
    for (value, expected) in setting.choices.iter().chain(&setting.examples) {
        match run_with(binary, setting, value) {
            Checked::Accepted(config) => match shown_in(setting, &config) {
                Some(shown) if holds(&shown, expected) => {}
                shown => failures.push(format!(
                    "{var}={value} shows {shown:?} at {}, not {expected}",
                    setting.shown_at
                )),
            },
            Checked::Refused(why) => failures.push(format!("{var}={value} is refused: {why}")),
        }
    }
    failures
}

/// The values refused (with the settings it needs, or alone), each refusal naming the
/// setting; a test that refuses none must say why any value is taken.
fn check_refusals(binary: &Binary, setting: &Setting) -> Vec<String> {
    let var = setting.var;
    let mut failures = Vec::new();
    let alone = setting
        .refused_alone
        .iter()
        .map(|value| (value, binary.check(&[(var, value.clone())])));
    let with_context = setting
        .refused
        .iter()
        .map(|value| (value, run_with(binary, setting, value)));
    if setting.refused.is_empty() && setting.refused_alone.is_empty() && setting.any_value.is_none()
    {
        failures.push(format!(
            "{var}: the test refuses no value, and does not say why any value is taken"
        ));
    }
    for (value, checked) in with_context.chain(alone) {
        match checked {
            Checked::Refused(why) if why.contains(var) => {}
            Checked::Refused(why) => failures.push(format!(
                "{var}={value:?} is refused without naming {var}: {why}"
            )),
            Checked::Accepted(config) => failures.push(format!(
                "{var}={value:?} is taken (shown as {:?}), not refused",
                shown_in(setting, &config)
            )),
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUNNING: &str = "# Running\n\n| variable | default | meaning |\n|---|---|---|\n| `A2A_PORT` | `8080` | port |\n| `RETRY_BASE_DELAY` / `RETRY_MAX_DELAY` | `1s` / `1m` | delays |\n| `SESSION_TTL` | `720h` (30 days) | ttl |\n| `AGENTS_CONFIG` / `PALLAS_AGENTS_CONFIG` | `./agents.yaml` if present | file |\n\n| `TASKS_DB` | what |\n|---|---|\n| `memory` | here |\n";
    const PUSH: &str = "# Push\n\nProse with `NOT_A_ROW`.\n\n| variable | default | meaning |\n|---|---|---|\n| `PUSH_ALLOW_HOSTS` | | a `1|2` cell |\n| `REPLICA_ID` | `<hostname>:<port>` | name |\n| `SERVE_AGENT` (`--agent`) | — | agent |\n";

    #[test]
    fn rows_come_from_the_variable_tables_of_every_page_given() {
        let rows = configuration_rows(&[
            Page {
                path: "docs/running.md",
                text: RUNNING,
            },
            Page {
                path: "docs/push.md",
                text: PUSH,
            },
        ]);
        let vars: Vec<&str> = rows
            .iter()
            .flat_map(|r| r.vars.iter().map(String::as_str))
            .collect();
        assert_eq!(
            vars,
            [
                "A2A_PORT",
                "RETRY_BASE_DELAY",
                "RETRY_MAX_DELAY",
                "SESSION_TTL",
                "AGENTS_CONFIG",
                "PALLAS_AGENTS_CONFIG",
                "PUSH_ALLOW_HOSTS",
                "REPLICA_ID",
                "SERVE_AGENT"
            ]
        );
        let default = |var: &str| {
            let row = rows
                .iter()
                .find(|r| r.vars.iter().any(|v| v == var))
                .unwrap();
            literal_default(row, var)
        };
        assert_eq!(default("A2A_PORT").as_deref(), Some("8080"));
        assert_eq!(default("RETRY_MAX_DELAY").as_deref(), Some("1m"));
        assert_eq!(default("SESSION_TTL").as_deref(), Some("720h"));
        assert_eq!(default("REPLICA_ID"), None);
        assert_eq!(default("AGENTS_CONFIG"), None);
        let allow = rows
            .iter()
            .find(|r| r.vars == ["PUSH_ALLOW_HOSTS"])
            .unwrap();
        assert_eq!(allow.default, "");
        assert_eq!(default("SERVE_AGENT"), None);
    }

    #[test]
    fn an_object_holds_the_keys_asked_for() {
        let shown = serde_json::json!({"kind": "sqlite", "path": "/x"});
        assert!(holds(&shown, &serde_json::json!({"kind": "sqlite"})));
        assert!(!holds(&shown, &serde_json::json!({"kind": "memory"})));
        assert!(!holds(&serde_json::json!(1), &serde_json::json!(2)));
    }
}
