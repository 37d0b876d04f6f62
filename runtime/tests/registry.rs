//! The registry Daedalus discovers agents from: the example deployment's document against a
//! golden file and the schema, and a live runtime serving it — with agents on their own ports
//! and the registry on `registry_port`, as a Pallas layout would.

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use daedalus_contract::Schema;
use daedalus_runtime::config::deployment::{Deployment, Sources};
use daedalus_runtime::faces::mcp::registry::{Addresses, document};
use daedalus_test_kit::free_port;
use serde_json::Value;
use support::runtime::Runtime;

fn example_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/two-agents")
}

#[test]
fn the_example_deployments_registry_matches_its_golden_file() {
    let lookup = |_: &str| None;
    let deployment = Deployment::load(&Sources {
        env: &lookup,
        cwd: example_dir(),
        agent_name: "x".into(),
        default_model: "passthrough".into(),
    })
    .expect("the example loads");
    let served: Vec<_> = deployment.agents.iter().collect();
    let doc = document(
        &deployment,
        &served,
        &Addresses {
            main_base: "http://localhost:8080".into(),
            host: deployment.host.clone(),
        },
        "2026-01-01T00:00:00Z",
    );
    let value = serde_json::to_value(&doc).expect("serializes");
    Schema::McpRegistry
        .validate(&value)
        .unwrap_or_else(|e| panic!("{value:#}: {e}"));
    let golden_path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/registry-two-agents.json");
    let golden: Value = serde_json::from_str(
        &std::fs::read_to_string(&golden_path).expect("the golden file exists"),
    )
    .expect("golden JSON");
    assert_eq!(value, golden, "{value:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_on_their_own_ports_are_listed_by_the_registry_port() {
    let (registry_port, research_port, lead_port) = (free_port(), free_port(), free_port());
    let rt = Runtime::start(&format!(
            "name: lab\nversion: \"2.1.0\"\nhost: 127.0.0.1\nnamespace: org.example.lab\n\
             registry_port: {registry_port}\n\
             model_capabilities: {{ vision: true, context_window: 200000, max_output_tokens: 32000 }}\n\
             agents:\n  \
               tech_research: {{ port: {research_port}, title: Research, description: Finds things }}\n  \
               lead: {{ port: {lead_port}, depends_on: [tech_research], servers: [tech_research] }}\n"
    ))
    .await;
    let main = rt.port();
    let registry_url = format!("http://127.0.0.1:{registry_port}/.well-known/mcp/server.json");
    let deadline = Instant::now() + Duration::from_secs(10);
    let response = loop {
        if let Ok(r) = reqwest::get(&registry_url).await {
            break r;
        }
        assert!(Instant::now() < deadline, "the registry port answered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .is_ok_and(|c| c.starts_with("application/json"))
    );
    let doc: Value = response.json().await.expect("JSON");
    Schema::McpRegistry
        .validate(&doc)
        .unwrap_or_else(|e| panic!("{doc:#}: {e}"));
    let names: Vec<&str> = doc["servers"]
        .as_array()
        .expect("servers")
        .iter()
        .filter_map(|s| s["server"]["name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["org.example.lab/lead", "org.example.lab/tech-research"]
    );
    let research = &doc["servers"][1]["server"];
    assert_eq!(
        research["remotes"][0]["url"],
        format!("http://127.0.0.1:{research_port}/mcp")
    );
    assert_eq!(research["version"], "2.1.0");
    assert_eq!(research["capabilities"]["context_window"], 200_000);
    assert_eq!(
        doc["servers"][1]["_meta"]["io.modelcontextprotocol.registry/official"]["status"],
        "active"
    );

    // The main port serves the same document, and every listed remote answers MCP.
    let same: Value = reqwest::get(format!(
        "http://127.0.0.1:{main}/.well-known/mcp/server.json"
    ))
    .await
    .expect("main port")
    .json()
    .await
    .expect("JSON");
    assert_eq!(same, doc);
    for entry in doc["servers"].as_array().expect("servers") {
        let url = entry["server"]["remotes"][0]["url"].as_str().expect("url");
        let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url.to_owned());
        let client = rmcp::ServiceExt::serve((), transport)
            .await
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        let tools = client.list_all_tools().await.expect("tools");
        assert!(tools.iter().any(|t| t.name == "get_health"), "{url}");
    }
    let metrics = reqwest::get(format!("http://127.0.0.1:{registry_port}/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains(&format!(
            "pallas_agent_info{{agent=\"tech_research\",port=\"{research_port}\"}} 1"
        )),
        "{metrics}"
    );
}
