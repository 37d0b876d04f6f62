//! `deploy/monitoring/`: the alert rules load (`promtool check rules`), every alert fires on
//! the series of its case and stays silent on the healthy ones beside them (`promtool test
//! rules`), every alert has such a case, and every metric an alert names is one the binaries
//! export. Prometheus and promtool come from Debian's `prometheus` package (`.ci/setup`).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use daedalus_test_kit::docs::workspace;
use serde_json::Value;

fn monitoring() -> PathBuf {
    workspace().join("deploy/monitoring")
}

fn promtool(args: &[&str]) -> (bool, String) {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(monitoring())
        .output()
        .expect("promtool runs (Debian's prometheus package: .ci/setup installs it)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn yaml(file: &str) -> Value {
    let text = std::fs::read_to_string(monitoring().join(file)).expect("the file reads");
    serde_saphyr::from_str(&text).expect("YAML")
}

/// Every alert of `alerts.yml`, with its expression.
fn alerts() -> Vec<(String, String)> {
    yaml("alerts.yml")["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().expect("rules").clone())
        .map(|r| {
            (
                r["alert"].as_str().expect("an alert").to_owned(),
                r["expr"].as_str().expect("an expression").to_owned(),
            )
        })
        .collect()
}

#[test]
fn the_alert_rules_load_and_each_fires_on_its_case_and_not_on_a_healthy_one() {
    let (ok, text) = promtool(&["check", "rules", "alerts.yml"]);
    assert!(ok, "{text}");
    let (ok, text) = promtool(&["test", "rules", "alerts.test.yml"]);
    assert!(ok, "{text}");
}

#[test]
fn every_alert_has_a_case_that_fires_it() {
    let tests = yaml("alerts.test.yml");
    let fired: BTreeSet<String> = tests["tests"]
        .as_array()
        .expect("tests")
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_array().cloned().unwrap_or_default())
        .filter(|case| case["exp_alerts"].as_array().is_some_and(|a| !a.is_empty()))
        .map(|case| {
            case["alertname"]
                .as_str()
                .expect("an alert name")
                .to_owned()
        })
        .collect();
    let missing: Vec<String> = alerts()
        .into_iter()
        .map(|(alert, _)| alert)
        .filter(|alert| !fired.contains(alert))
        .collect();
    assert!(missing.is_empty(), "alerts no case fires: {missing:?}");
}

/// The metric names an expression selects (`daedalus_…`, `pallas_…`, `up`).
fn metrics_named(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut word = String::new();
    for c in expr.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        if word.starts_with("daedalus_") || word.starts_with("pallas_") {
            names.insert(std::mem::take(&mut word));
        }
        word.clear();
    }
    names
}

#[test]
fn every_metric_an_alert_names_is_one_the_binaries_export() {
    let exported = exported_families();
    let mut unknown = Vec::new();
    for (alert, expr) in alerts() {
        for name in metrics_named(&expr) {
            let family = ["_total", "_bucket", "_count", "_sum"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .unwrap_or(&name);
            if !exported.contains(family) {
                unknown.push(format!("{alert}: {name}"));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "metrics neither binary exports: {unknown:?}"
    );
}

/// Every metric family the runtime and the proxy register, by the names their sources give
/// `register` (a family is on `/metrics` from its first sample).
fn exported_families() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (dir, prefix) in [("runtime/src", ""), ("proxy/src", "daedalus_proxy_")] {
        for file in rust_files(&workspace().join(dir)) {
            let text = std::fs::read_to_string(&file).expect("reads");
            let mut rest = text.as_str();
            while let Some(at) = rest.find("register(") {
                rest = &rest[at + "register(".len()..];
                let Some(open) = rest.find('"') else { break };
                let name: String = rest[open + 1..].chars().take_while(|c| *c != '"').collect();
                if rest[..open].trim().is_empty() {
                    names.insert(format!("{prefix}{name}"));
                }
            }
            // The store figures are named where they are read.
            for line in text.lines() {
                let line = line.trim();
                if let Some(quoted) = line.strip_prefix('"').and_then(|l| l.strip_suffix("\","))
                    && quoted.starts_with("daedalus_runtime_")
                {
                    names.insert(quoted.to_owned());
                }
            }
        }
    }
    names
}

fn rust_files(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("a directory").flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

#[test]
fn an_alert_naming_an_unknown_metric_is_caught() {
    let exported = exported_families();
    assert!(exported.contains("daedalus_runtime_tasks"), "{exported:?}");
    assert!(
        exported.contains("daedalus_proxy_redeliveries"),
        "{exported:?}"
    );
    assert!(
        exported.contains("daedalus_runtime_store_wal_bytes"),
        "{exported:?}"
    );
    assert!(!exported.contains("daedalus_runtime_made_up"));
    assert_eq!(
        metrics_named("rate(daedalus_runtime_made_up_total[5m]) > up"),
        BTreeSet::from(["daedalus_runtime_made_up_total".to_owned()])
    );
}
