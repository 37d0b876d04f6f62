//! What the conversation store costs a turn, on the default configuration, measured in one
//! run against the same runtime with `SESSIONS_DB=off`: JSON-RPC `SendMessage` (the
//! `passthrough` model, whose every turn the store records: its user row, its answer, and both
//! settled) at 16 in flight, on the default SQLite file and on a NATS KV bucket.
//!
//! Then the store as it grows: one run of `CONVERSATIONS` turns (1,000,000 unless the
//! environment says otherwise), each beginning a new conversation, on the default SQLite
//! file, with the requests per second of each tenth of the run and of the stretches at 0,
//! 100k and 1M conversations. Targets: the default at least 0.5× of `SESSIONS_DB=off`, and
//! the last tenth of the run at least 0.8× of the first.
//!
//! Run: `cargo bench -p daedalus-runtime --bench conversation_store`.

#![allow(clippy::print_stdout, reason = "a benchmark prints its table")]
#![allow(clippy::cast_precision_loss, reason = "figures for people")]

#[path = "support/load.rs"]
mod load;

use daedalus_test_kit::{NatsServer, RuntimeProcess};
use load::Figures;

/// Requests per row of the first table, after a warm-up.
const REQUESTS: usize = 20_000;
const WARM_UP: usize = 1_000;
const IN_FLIGHT: usize = 16;
/// Requests per stretch of the growth run (each timed on its own), at most.
const STRETCH: usize = 10_000;

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(IN_FLIGHT)
        .build()
        .expect("a client")
}

/// Requests `numbers` to `url`, after `WARM_UP` of its own.
async fn load(url: &str, numbers: std::ops::Range<usize>) -> Figures {
    let client = client();
    for i in 0..WARM_UP {
        load::send_message(&client, url, 100_000_000 + i).await;
    }
    load::run(IN_FLIGHT, numbers, |i| load::send_message(&client, url, i)).await
}

fn row(name: &str, f: &Figures) {
    println!(
        "| {name} | {:.0} | {:.3} ms | {:.3} ms |",
        f.rate, f.p50_ms, f.p99_ms
    );
}

fn main() {
    let conversations: usize = std::env::var("CONVERSATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let rt = tokio::runtime::Runtime::new().expect("a tokio runtime");
    rt.block_on(async {
        let nats = NatsServer::start();
        println!("\nJSON-RPC SendMessage, passthrough model, {IN_FLIGHT} in flight, {REQUESTS} requests per row\n");
        println!("| conversation store | requests/s | p50 | p99 |");
        println!("|---|---|---|---|");
        let off = {
            let runtime = RuntimeProcess::start_with("bench", &[("SESSIONS_DB", "off")]).await;
            load(&format!("{}/", runtime.url()), 0..REQUESTS).await
        };
        row("`SESSIONS_DB=off`", &off);
        let sqlite = {
            let runtime = RuntimeProcess::start("bench").await;
            load(&format!("{}/", runtime.url()), 0..REQUESTS).await
        };
        row("default (SQLite file)", &sqlite);
        let kv = {
            let url = format!("{}/bench-conversations", nats.url());
            let runtime = RuntimeProcess::start_with("bench", &[("SESSIONS_DB", &url)]).await;
            load(&format!("{}/", runtime.url()), 0..REQUESTS).await
        };
        row("NATS KV bucket", &kv);

        println!("\nThe default SQLite store growing to {conversations} conversations, one new conversation per request\n");
        println!("| conversations stored | requests/s | p50 | p99 |");
        println!("|---|---|---|---|");
        let runtime = RuntimeProcess::start("bench").await;
        let url = format!("{}/", runtime.url());
        let client = client();
        let mut stretches = Vec::new();
        let stretch = STRETCH.min(conversations / 10).max(1);
        let mut done = 0;
        while done < conversations {
            let end = (done + stretch).min(conversations);
            let figures = load::run(IN_FLIGHT, done..end, |i| load::send_message(&client, &url, i)).await;
            stretches.push((done, end, figures));
            done = end;
        }
        let at = |mark: usize| stretches.iter().find(|(from, end, _)| *from <= mark && mark < *end);
        for mark in [0, 100_000, conversations.saturating_sub(1)] {
            if let Some((from, _, f)) = at(mark) {
                row(&format!("{from}"), f);
            }
        }
        let tenth = |which: usize| {
            let (from, to) = (conversations * which / 10, conversations * (which + 1) / 10);
            let picked: Vec<&Figures> = stretches
                .iter()
                .filter(|(start, _, _)| *start >= from && *start < to)
                .map(|(_, _, f)| f)
                .collect();
            picked.iter().map(|f| f.rate).sum::<f64>() / picked.len().max(1) as f64
        };
        println!("\n| tenth of the run | requests/s |");
        println!("|---|---|");
        for which in 0..10 {
            println!("| {} | {:.0} |", which + 1, tenth(which));
        }
        let ratio = sqlite.rate / off.rate;
        let growth = tenth(9) / tenth(0);
        println!(
            "\nthe default store serves {ratio:.2}× of SESSIONS_DB=off (target 0.5×: {}); \
             the last tenth {growth:.2}× of the first (target 0.8×: {})",
            if ratio >= 0.5 { "met" } else { "NOT met" },
            if growth >= 0.8 { "met" } else { "NOT met" },
        );
    });
}
