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

/// A real Prometheus (Debian's), scraping `targets` by job every second, killed on drop.
struct Prometheus {
    child: std::process::Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn scraping(targets: &[(&str, String)]) -> Self {
        let dir = tempfile::tempdir().expect("a dir");
        let jobs: Vec<String> = targets
            .iter()
            .map(|(job, target)| {
                format!("  - job_name: {job}\n    static_configs: [{{ targets: [\"{target}\"] }}]")
            })
            .collect();
        let jobs = jobs.join("\n");
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global: {{ scrape_interval: 1s, evaluation_interval: 1s }}\nrule_files: [\"{}\"]\nscrape_configs:\n{jobs}\n",
                monitoring().join("alerts.yml").display()
            ),
        )
        .expect("written");
        let port = daedalus_test_kit::free_port();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("prometheus runs (Debian's prometheus package: .ci/setup installs it)");
        Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
            _dir: dir,
        }
    }

    /// The result of the instant query `expr` (an error's text when it fails).
    async fn query(&self, expr: &str) -> Result<Vec<Value>, String> {
        let encoded: String = expr
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                    char::from(b).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect();
        let answer: Value = reqwest::Client::new()
            .get(format!("{}/api/v1/query?query={encoded}", self.url))
            .send()
            .await
            .map_err(|e| e.to_string())?
            .json()
            .await
            .map_err(|e| e.to_string())?;
        if answer["status"] != "success" {
            return Err(answer.to_string());
        }
        Ok(answer["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The proxy of `agent` on `nats`, in front of the runtime at `runtime`, killed on drop.
struct Proxy {
    child: std::process::Child,
    port: u16,
}

impl Proxy {
    fn start(agent: &str, nats: &str, runtime: &str) -> Self {
        let port = daedalus_test_kit::free_port();
        let child = Command::new(daedalus_test_kit::proxy_binary())
            .env_clear()
            .env("AGENT_NAME", agent)
            .env("NATS_URL", nats)
            .env("RUNTIME_URL", runtime)
            .env("PROXY_PORT", port.to_string())
            .env("PROXY_HOST", "127.0.0.1")
            .env("LOG_LEVEL", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("the proxy starts");
        Self { child, port }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every query of every panel of the dashboard.
fn dashboard_queries() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(monitoring().join("dashboard.json")).expect("reads");
    let dashboard: Value = serde_json::from_str(&text).expect("JSON");
    dashboard["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .flat_map(|panel| {
            let title = panel["title"].as_str().unwrap_or_default().to_owned();
            panel["targets"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |t| {
                    (
                        title.clone(),
                        t["expr"].as_str().expect("an expression").to_owned(),
                    )
                })
        })
        .collect()
}

async fn wait_for(what: &str, mut ready: impl AsyncFnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_mins(1);
    while !ready().await {
        assert!(
            std::time::Instant::now() < deadline,
            "waited 60 s for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_query_and_alert_metric_has_data_from_a_real_prometheus_scraping_the_stack()
{
    use daedalus_fake_llm::{AutoReply, FakeLlm};
    let nats = daedalus_test_kit::NatsServer::start();
    let fake = FakeLlm::start("sk-watch", &["gpt-fake"]).await;
    fake.auto(AutoReply {
        tools: Vec::new(),
        text: "watched".to_owned(),
        arguments: None,
        rounds: 0,
    });
    let dir = tempfile::tempdir().expect("a dir");
    let agents = dir.path().join("agents.yaml");
    std::fs::write(
        &agents,
        format!(
            "default_model: openai.gpt-fake\nopenai: {{ api_key: sk-watch, base_url: \"{}\" }}\n\
             budgets:\n  agents:\n    watched: {{ turns_per_minute: 8 }}\n\
             agents:\n  watched: {{ instruction: Answer. }}\n",
            fake.openai_base_url
        ),
    )
    .expect("written");
    let runtime = daedalus_test_kit::RuntimeProcess::start_with(
        "watched",
        &[("AGENTS_CONFIG", &agents.to_string_lossy())],
    )
    .await;
    let proxy = Proxy::start("watched", &nats.url(), &runtime.url());
    let http = reqwest::Client::new();
    let proxy_health = format!("http://127.0.0.1:{}/healthz", proxy.port);
    wait_for("the proxy", async || {
        http.get(&proxy_health)
            .send()
            .await
            .is_ok_and(|r| r.status() == 200)
    })
    .await;
    let prometheus = Prometheus::scraping(&[
        ("daedalus-runtime", format!("127.0.0.1:{}", runtime.port())),
        ("daedalus-proxy", format!("127.0.0.1:{}", proxy.port)),
    ]);
    wait_for("both scraped", async || {
        prometheus
            .query("up == 1")
            .await
            .is_ok_and(|up| up.len() == 2)
    })
    .await;

    // A short load through every face: tasks through NATS, contract turns past the agent's
    // budget, an MCP session and a send_message.
    for i in 0..4 {
        let published = Command::new(daedalus_test_kit::proxy_binary())
            .env_clear()
            .env("NATS_URL", nats.url())
            .args(["publish", "--agent", "watched", "--timeout", "30s"])
            .arg(format!("published {i}"))
            .output()
            .expect("publish runs");
        assert!(published.status.success(), "{published:?}");
    }
    let mcp = format!("{}/agents/watched/mcp", runtime.url());
    let opened = daedalus_test_kit::open_mcp_session(&http, &mcp, true).await;
    assert_eq!(opened.status, 200, "{}", opened.body);
    daedalus_test_kit::modern_mcp_request(
        &http,
        &mcp,
        &daedalus_test_kit::ModernClient::named("watcher"),
        "tools/call",
        serde_json::json!({"name": "send_message", "arguments": {"message": "hello"}}),
    )
    .await;
    for i in 0..10 {
        let _ = http
            .post(format!("{}/", runtime.url()))
            .json(&serde_json::json!({"message": {"messageId": format!("direct-{i}"), "role": "user", "parts": [{"text": "hi"}]}}))
            .send()
            .await
            .expect("answered");
    }
    wait_for("the load scraped", async || {
        prometheus
            .query("sum(daedalus_runtime_budget_refusals_total) > 0 and sum(daedalus_proxy_tasks_completed_total) >= 4")
            .await
            .is_ok_and(|r| !r.is_empty())
    })
    .await;
    // Two more scrapes, so every rate has its two samples after the load.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;

    let mut empty = Vec::new();
    for (panel, expr) in dashboard_queries() {
        match prometheus.query(&expr).await {
            Ok(result) if !result.is_empty() => {}
            Ok(_) => empty.push(format!("{panel}: {expr}: no data")),
            Err(e) => empty.push(format!("{panel}: {expr}: {e}")),
        }
    }
    for (alert, expr) in alerts() {
        for name in metrics_named(&expr) {
            let selector = format!("count({{__name__=\"{name}\"}})");
            if !prometheus
                .query(&selector)
                .await
                .is_ok_and(|r| !r.is_empty())
            {
                empty.push(format!("{alert}: {name} has no series"));
            }
        }
    }
    assert!(
        empty.is_empty(),
        "queries without data:\n{}",
        empty.join("\n")
    );
}

/// The `full` overlay as `kubectl kustomize` renders it, as JSON values.
fn full_overlay() -> Vec<Value> {
    let kubectl = workspace().join(".venv-k8s/bin/kubectl");
    let output = Command::new(kubectl)
        .arg("kustomize")
        .arg(workspace().join("deploy/kubernetes/overlays/full"))
        .output()
        .expect("kubectl runs (.ci/setup installs it into .venv-k8s)");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_saphyr::from_multiple(&String::from_utf8_lossy(&output.stdout)).expect("objects")
}

fn of_kind<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = objects.iter().filter(|o| o["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "one {kind}");
    found[0]
}

#[test]
fn the_kubernetes_component_holds_the_same_rules_and_scrapes_both_containers() {
    let objects = full_overlay();
    let rule = of_kind(&objects, "PrometheusRule");
    assert_eq!(rule["metadata"]["namespace"], "daedalus");
    assert_eq!(
        rule["spec"]["groups"],
        yaml("alerts.yml")["groups"],
        "components/monitoring/prometheusrule.yaml holds alerts.yml's groups, unchanged"
    );
    let monitor = of_kind(&objects, "PodMonitor");
    let pod = &of_kind(&objects, "Deployment")["spec"]["template"];
    for (label, value) in monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("labels")
    {
        assert_eq!(
            &pod["metadata"]["labels"][label], value,
            "the PodMonitor selects the pod"
        );
    }
    // The proxy is a native sidecar (an init container that keeps running).
    let ports: BTreeSet<String> = ["containers", "initContainers"]
        .iter()
        .flat_map(|list| pod["spec"][list].as_array().cloned().unwrap_or_default())
        .flat_map(|c| c["ports"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p["name"].as_str().map(str::to_owned))
        .collect();
    let jobs: BTreeSet<String> = monitor["spec"]["podMetricsEndpoints"]
        .as_array()
        .expect("endpoints")
        .iter()
        .map(|e| {
            let port = e["port"].as_str().expect("a port name");
            assert!(
                ports.contains(port),
                "{port} is not a port of the pod: {ports:?}"
            );
            e["relabelings"][0]["replacement"]
                .as_str()
                .expect("a job")
                .to_owned()
        })
        .collect();
    assert_eq!(
        jobs,
        BTreeSet::from(["daedalus-proxy".to_owned(), "daedalus-runtime".to_owned()]),
        "the jobs the alerts name"
    );
}
