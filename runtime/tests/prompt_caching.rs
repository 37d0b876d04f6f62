//! Prompt caching on Anthropic, through the runtime: every request carries cache breakpoints on
//! the tools, the system prompt and the newest message, the strict fake caches the prefixes as
//! the API does, so the second turn of a conversation reads from the cache, and `/metrics`
//! counts it as `kind="cache_read"`.

mod support;

use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_mcp_fixture::McpFixture;
use serde_json::{Value, json};
use support::runtime::Runtime;

const KEY: &str = "sk-ant-cache";
const MODEL: &str = "claude-cache";

async fn turn(url: &str, id: &str, text: &str) -> Value {
    reqwest::Client::new()
        .post(format!("{url}/"))
        .json(
            &json!({"message": {"messageId": id, "contextId": "cached", "role": "user",
            "parts": [{"text": text}]}}),
        )
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("a Task")
}

#[tokio::test]
async fn a_conversations_second_turn_reads_its_prompt_from_the_cache() {
    let tools = McpFixture::start().await;
    let fake = FakeLlm::start(KEY, &[MODEL]).await;
    fake.script([Reply::Text("first".into()), Reply::Text("second".into())]);
    let yaml = format!(
        "default_model: anthropic.{MODEL}\nanthropic: {{ api_key: {KEY}, base_url: \"{}\" }}\n\
         mcp:\n  servers:\n    fx: {{ url: \"{}\" }}\n\
         agents:\n  a: {{ instruction: Be brief and precise., servers: [fx] }}\n",
        fake.anthropic_base_url,
        tools.url()
    );
    let rt = Runtime::start(&yaml).await;
    assert_eq!(
        turn(&rt.url, "c-1", "hello there").await["status"]["state"],
        "completed"
    );
    assert_eq!(
        turn(&rt.url, "c-2", "and again").await["status"]["state"],
        "completed"
    );

    let log = fake.requests();
    assert_eq!(log.len(), 2, "{log:?}");
    assert!(log.iter().all(|l| l.refused.is_none()), "{log:?}");
    let breakpoint = json!({"type": "ephemeral"});
    for request in &log {
        let body = &request.body;
        assert_eq!(body["system"][0]["cache_control"], breakpoint, "{body}");
        let tools = body["tools"].as_array().expect("tools");
        assert_eq!(tools.last().expect("a tool")["cache_control"], breakpoint);
        assert!(
            tools[..tools.len() - 1]
                .iter()
                .all(|t| t.get("cache_control").is_none())
        );
        let newest = body["messages"]
            .as_array()
            .expect("messages")
            .last()
            .cloned()
            .expect("one");
        let block = newest["content"]
            .as_array()
            .expect("blocks")
            .last()
            .cloned()
            .expect("one");
        assert_eq!(block["cache_control"], breakpoint, "{newest}");
    }
    let metrics = reqwest::get(format!("{}/metrics", rt.url))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    let counted = |kind: &str| -> u64 {
        metrics
            .lines()
            .filter(|l| {
                l.starts_with("pallas_llm_tokens_total{") && l.contains(&format!("kind=\"{kind}\""))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    };
    assert!(
        counted("cache_write") > 0,
        "the first turn wrote the cache:\n{metrics}"
    );
    assert!(
        counted("cache_read") > 0,
        "the second turn read it:\n{metrics}"
    );
}
