//! The corpus's assertion language: a scalar is an exact match; a list matches an array by
//! position; a map is fields and operators together, all of which must hold. A key is an
//! operator when it is one's name *and* its argument has that operator's shape (so a
//! problem-details body's `type: {type: string}` is a field `type` holding a string);
//! otherwise it is a field.
//!
//! Operators: `type` (string, number, boolean, array, object, null), `exists`, `absent`,
//! `contains`, `matches` (a regular expression), `starts_with`, `ends_with`, `gt`, `gte`,
//! `lt`, `lte`, `count`, `count_gte`, `count_lte`, `one_of` (a map among its options is an
//! assertion), `all_of`, `any_of`, `not`, `items` (a map for every element, a list by
//! position). An operator name with the wrong shape of argument is read as a field, which
//! the answer does not have: the test fails, naming it, and never passes by mistake.

use serde_json::Value;

use super::scope::Read;

/// One assertion that did not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Where in the answer (`task.status.state`).
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// What an evaluation found: its failures, and how many comparisons ran.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    pub failures: Vec<Failure>,
    pub checks: usize,
}

impl Verdict {
    pub fn ok(&self) -> bool {
        self.failures.is_empty()
    }

    fn pass() -> Self {
        Self {
            failures: Vec::new(),
            checks: 1,
        }
    }

    pub fn fail(path: &str, message: impl Into<String>) -> Self {
        Self {
            failures: vec![Failure {
                path: path.to_owned(),
                message: message.into(),
            }],
            checks: 1,
        }
    }

    #[must_use]
    pub fn and(mut self, other: Self) -> Self {
        self.failures.extend(other.failures);
        self.checks += other.checks;
        self
    }
}

const TYPE_NAMES: [&str; 6] = ["string", "number", "boolean", "array", "object", "null"];

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn show(value: Read<'_>) -> String {
    match value {
        Read::Found(v) => v.to_string(),
        Read::Missing => "nothing".to_owned(),
    }
}

/// Whether `key` is an operator with an argument of its shape.
fn is_operator(key: &str, argument: &Value) -> bool {
    match key {
        "type" => argument.as_str().is_some_and(|t| TYPE_NAMES.contains(&t)),
        "exists" | "absent" => argument.is_boolean(),
        "contains" | "matches" | "starts_with" | "ends_with" => argument.is_string(),
        "gt" | "gte" | "lt" | "lte" => argument.is_number(),
        "count" | "count_gte" | "count_lte" => argument.is_u64(),
        "one_of" => argument.is_array(),
        "all_of" | "any_of" => argument.as_array().is_some_and(|a| !a.is_empty()),
        "not" => true,
        "items" => argument.is_array() || argument.is_object(),
        _ => false,
    }
}

/// Exact JSON equality, numbers by value (`1` equals `1.0`).
pub fn same(actual: &Value, expected: &Value) -> bool {
    match (actual, expected) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| same(v, w)))
        }
        _ => actual == expected,
    }
}

/// Evaluates `assertion` against `actual` (at `path`, for messages).
pub fn evaluate(assertion: &Value, actual: Read<'_>, path: &str) -> Verdict {
    match assertion {
        Value::Object(map) => {
            let mut verdict = Verdict::default();
            for (key, argument) in map {
                let one = if is_operator(key, argument) {
                    operator(key, argument, actual, path)
                } else {
                    let member = match actual {
                        Read::Found(Value::Object(o)) => {
                            o.get(key).map_or(Read::Missing, Read::Found)
                        }
                        _ => Read::Missing,
                    };
                    evaluate(argument, member, &join(path, key))
                };
                verdict = verdict.and(one);
            }
            verdict
        }
        Value::Array(items) => positional(items, actual, path),
        expected => match actual {
            Read::Found(value) if same(value, expected) => Verdict::pass(),
            Read::Found(value) => Verdict::fail(path, format!("expected {expected}, got {value}")),
            Read::Missing => Verdict::fail(path, format!("expected {expected}, got nothing")),
        },
    }
}

fn positional(items: &[Value], actual: Read<'_>, path: &str) -> Verdict {
    let Read::Found(Value::Array(elements)) = actual else {
        return Verdict::fail(path, format!("expected an array, got {}", show(actual)));
    };
    if elements.len() < items.len() {
        return Verdict::fail(
            path,
            format!("{} element(s), {} asserted", elements.len(), items.len()),
        );
    }
    items.iter().zip(elements).enumerate().fold(
        Verdict::default(),
        |verdict, (i, (item, element))| {
            verdict.and(evaluate(
                item,
                Read::Found(element),
                &format!("{path}[{i}]"),
            ))
        },
    )
}

fn type_of(value: &Value) -> &'static str {
    match value {
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "boolean",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => "null",
    }
}

fn operator(name: &str, argument: &Value, actual: Read<'_>, path: &str) -> Verdict {
    let present = matches!(actual, Read::Found(_));
    match name {
        "exists" | "absent" => {
            let wanted = argument.as_bool() == Some(name == "exists");
            if present == wanted {
                Verdict::pass()
            } else if present {
                Verdict::fail(path, format!("expected nothing here, got {}", show(actual)))
            } else {
                Verdict::fail(path, "expected a value here, got nothing")
            }
        }
        "all_of" => argument
            .as_array()
            .into_iter()
            .flatten()
            .fold(Verdict::default(), |v, branch| {
                v.and(evaluate(branch, actual, path))
            }),
        "any_of" => {
            let branches = argument.as_array().map_or(&[][..], Vec::as_slice);
            if branches.iter().any(|b| evaluate(b, actual, path).ok()) {
                Verdict::pass()
            } else {
                Verdict::fail(path, format!("{} matched none of {argument}", show(actual)))
            }
        }
        "not" => {
            if evaluate(argument, actual, path).ok() {
                Verdict::fail(
                    path,
                    format!("{} should not match {argument}", show(actual)),
                )
            } else {
                Verdict::pass()
            }
        }
        _ => {
            let Read::Found(value) = actual else {
                return Verdict::fail(
                    path,
                    format!("expected a value for `{name}: {argument}`, got nothing"),
                );
            };
            let held = leaf(name, argument, value, path);
            match held {
                Ok(true) => Verdict::pass(),
                Ok(false) => Verdict::fail(
                    path,
                    format!("`{name}: {argument}` does not hold for {value}"),
                ),
                Err(verdict) => verdict,
            }
        }
    }
}

/// A value operator on a present value; `Err` carries a verdict of its own (`items`).
fn leaf(name: &str, argument: &Value, value: &Value, path: &str) -> Result<bool, Verdict> {
    let number = value.as_f64().filter(|_| value.is_number());
    let bound = argument.as_f64().unwrap_or(f64::NAN);
    let count = value.as_array().map(Vec::len);
    let wanted = argument.as_u64().and_then(|n| usize::try_from(n).ok());
    let text = value.as_str();
    let needle = argument.as_str().unwrap_or_default();
    Ok(match name {
        "type" => argument.as_str() == Some(type_of(value)),
        "contains" => match value {
            Value::String(s) => s.contains(needle),
            Value::Array(items) => items.iter().any(|i| same(i, argument)),
            _ => false,
        },
        "matches" => match regex::Regex::new(needle) {
            Ok(pattern) => text.is_some_and(|t| pattern.is_match(t)),
            Err(e) => {
                return Err(Verdict::fail(
                    path,
                    format!("the pattern {needle:?} is not a regular expression: {e}"),
                ));
            }
        },
        "starts_with" => text.is_some_and(|t| t.starts_with(needle)),
        "ends_with" => text.is_some_and(|t| t.ends_with(needle)),
        "gt" => number.is_some_and(|n| n > bound),
        "gte" => number.is_some_and(|n| n >= bound),
        "lt" => number.is_some_and(|n| n < bound),
        "lte" => number.is_some_and(|n| n <= bound),
        "count" => count.is_some() && count == wanted,
        "count_gte" => count.zip(wanted).is_some_and(|(n, w)| n >= w),
        "count_lte" => count.zip(wanted).is_some_and(|(n, w)| n <= w),
        "one_of" => argument.as_array().into_iter().flatten().any(|option| {
            if option.is_object() {
                evaluate(option, Read::Found(value), path).ok()
            } else {
                same(value, option)
            }
        }),
        "items" => {
            let Value::Array(elements) = value else {
                return Ok(false);
            };
            return Err(match argument {
                Value::Array(items) => positional(items, Read::Found(value), path),
                each => elements
                    .iter()
                    .enumerate()
                    .fold(Verdict::pass(), |v, (i, element)| {
                        v.and(evaluate(
                            each,
                            Read::Found(element),
                            &format!("{path}[{i}]"),
                        ))
                    }),
            });
        }
        _ => unreachable!("only operators reach here"),
    })
}

/// Evaluates `until` (`path == VALUE`, `path in [A, B]`) against an answer.
pub fn until_holds(until: &str, answer: &Value) -> Result<bool, String> {
    let (path, wanted): (&str, Vec<&str>) = if let Some((path, value)) = until.split_once("==") {
        (path.trim(), vec![value.trim()])
    } else if let Some((path, list)) = until.split_once(" in ") {
        let list = list
            .trim()
            .strip_prefix('[')
            .and_then(|l| l.strip_suffix(']'))
            .ok_or_else(|| format!("`until: {until}`: expected `path in [A, B]`"))?;
        (path.trim(), list.split(',').map(str::trim).collect())
    } else {
        return Err(format!(
            "`until: {until}` is neither `path == VALUE` nor `path in [A, B]`"
        ));
    };
    let unquote = |s: &str| s.trim_matches(|c| c == '"' || c == '\'').to_owned();
    Ok(
        match super::scope::read(answer, path).map_err(|e| e.to_string())? {
            Read::Found(Value::String(s)) => wanted.iter().any(|w| unquote(w) == *s),
            Read::Found(other) => {
                let other = other.to_string();
                wanted.iter().any(|w| unquote(w) == other)
            }
            Read::Missing => false,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[expect(
        clippy::needless_pass_by_value,
        reason = "the tests read best with json! literals"
    )]
    fn holds(assertion: Value, actual: Value) -> bool {
        evaluate(&assertion, Read::Found(&actual), "").ok()
    }

    #[test]
    fn nesting_is_a_path_and_a_scalar_an_exact_match() {
        let task = json!({"task": {"id": "t-1", "status": {"state": "TASK_STATE_COMPLETED"}}});
        assert!(holds(
            json!({"task": {"status": {"state": "TASK_STATE_COMPLETED"}}}),
            task.clone()
        ));
        let verdict = evaluate(
            &json!({"task": {"status": {"state": "TASK_STATE_FAILED"}}}),
            Read::Found(&task),
            "",
        );
        assert_eq!(verdict.failures.len(), 1);
        assert_eq!(verdict.failures[0].path, "task.status.state");
        assert!(
            holds(json!({"n": 1}), json!({"n": 1.0})),
            "numbers by value"
        );
    }

    #[test]
    fn an_operator_is_one_only_with_an_argument_of_its_shape() {
        let problem = json!({"type": "about:blank", "title": "Not found", "status": 404});
        assert!(holds(
            json!({"type": {"type": "string"}, "title": {"type": "string"}, "status": {"type": "number"}}),
            problem
        ));
        assert!(holds(
            json!({"type": "array", "count_gte": 1, "items": {"type": "string"}}),
            json!(["a", "b"])
        ));
        assert!(!holds(
            json!({"items": {"type": "string"}}),
            json!(["a", 1])
        ));
        assert!(
            !holds(json!({"count_gte": "one"}), json!([1])),
            "a malformed operator is a field, which is not there"
        );
    }

    #[test]
    fn presence_tells_missing_from_null() {
        assert!(holds(json!({"a": {"exists": true}}), json!({"a": null})));
        assert!(!holds(json!({"a": {"absent": true}}), json!({"a": null})));
        assert!(holds(json!({"b": {"absent": true}}), json!({"a": 1})));
        assert!(!holds(json!({"b": {"exists": true}}), json!({"a": 1})));
        assert!(
            !holds(json!({"b": {"type": "string"}}), json!({})),
            "a value operator needs a value"
        );
    }

    #[test]
    fn the_other_operators_hold_as_named() {
        assert!(holds(json!({"one_of": [200, 401]}), json!(401)));
        assert!(holds(
            json!({"one_of": [{"task": {"exists": true}}, {"message": {"exists": true}}]}),
            json!({"message": {}})
        ));
        assert!(!holds(json!({"one_of": ["A", "B"]}), json!("C")));
        assert!(holds(json!({"contains": "lo w"}), json!("hello world")));
        assert!(
            holds(json!({"contains": "b"}), json!(["a", "b"])),
            "membership in an array"
        );
        assert!(holds(json!({"matches": "^t-[0-9]+$"}), json!("t-42")));
        assert!(holds(
            json!({"starts_with": "he", "ends_with": "lo"}),
            json!("hello")
        ));
        assert!(holds(json!({"gt": 1, "lte": 2}), json!(2)));
        assert!(!holds(json!({"lt": 1}), json!("0")), "a number only");
        assert!(holds(json!({"count": 2}), json!([0, 0])));
        assert!(holds(json!({"count_lte": 2}), json!([])));
        assert!(holds(
            json!({"any_of": [{"error": {"exists": true}}, {"title": {"type": "string"}}]}),
            json!({"title": "x"})
        ));
        assert!(!holds(
            json!({"all_of": [{"type": "string"}, {"starts_with": "x"}]}),
            json!("y")
        ));
        assert!(holds(json!({"not": {"type": "null"}}), json!(0)));
        assert!(
            holds(json!([{"a": 1}]), json!([{"a": 1}, {"a": 2}])),
            "a list by position"
        );
        assert!(!holds(json!([{}, {}]), json!([{}])));
    }

    #[test]
    fn until_reads_equality_and_membership() {
        let task = json!({"status": {"state": "TASK_STATE_WORKING"}});
        assert_eq!(
            until_holds("status.state == TASK_STATE_WORKING", &task),
            Ok(true)
        );
        assert_eq!(
            until_holds(
                "status.state in [TASK_STATE_COMPLETED, TASK_STATE_FAILED]",
                &task
            ),
            Ok(false)
        );
        assert_eq!(until_holds("status.missing == X", &task), Ok(false));
        assert!(until_holds("status.state ~ X", &task).is_err());
    }
}
