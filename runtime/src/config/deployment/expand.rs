//! `${VAR}` and `${VAR:-default}` expansion in every string of a parsed configuration file.

use serde_json::Value;

/// Expands variables in place. An unset variable without a default becomes "" and is reported
/// through `unset(key_path, var)`.
pub(super) fn expand(
    value: &mut Value,
    lookup: &dyn Fn(&str) -> Option<String>,
    path: &str,
    unset: &mut dyn FnMut(&str, &str),
) {
    match value {
        Value::String(s) if s.contains("${") => {
            *s = expand_str(s, lookup, &mut |var| unset(path, var));
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                expand(item, lookup, &format!("{path}[{i}]"), unset);
            }
        }
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                let child = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                expand(v, lookup, &child, unset);
            }
        }
        _ => {}
    }
}

fn expand_str(
    s: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    unset: &mut dyn FnMut(&str),
) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let inner = &after[..end];
        let (var, default) = match inner.split_once(":-") {
            Some((v, d)) => (v, Some(d)),
            None => (inner, None),
        };
        match (lookup(var), default) {
            (Some(v), _) if !v.is_empty() || default.is_none() => out.push_str(&v),
            (_, Some(d)) => out.push_str(d),
            (None, None) => unset(var),
            (Some(_), None) => {}
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(k: &str) -> Option<String> {
        match k {
            "KEY" => Some("sk-1".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn variables_expand_with_defaults_and_report_unset() {
        let mut unset = Vec::new();
        let mut doc = serde_json::json!({
            "a": "${KEY}",
            "b": "Bearer ${KEY}!",
            "c": "${MISSING:-fallback}",
            "d": ["${MISSING}"],
            "e": "${EMPTY:-used}",
            "f": "no ${ closing",
            "n": 3
        });
        expand(&mut doc, &lookup, "", &mut |path, var| {
            unset.push(format!("{path}={var}"));
        });
        assert_eq!(doc["a"], "sk-1");
        assert_eq!(doc["b"], "Bearer sk-1!");
        assert_eq!(doc["c"], "fallback");
        assert_eq!(doc["d"][0], "");
        assert_eq!(doc["e"], "used");
        assert_eq!(doc["f"], "no ${ closing");
        assert_eq!(doc["n"], 3);
        assert_eq!(unset, ["d[0]=MISSING"]);
    }
}
