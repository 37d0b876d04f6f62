//! The budget book on a clock the tests move.

use std::sync::atomic::{AtomicU64, Ordering};

use super::*;
use crate::platform::identity::{Known, Principal, Via};
use crate::platform::metrics::Metrics;

/// 2026-11-28T00:00:10Z: ten seconds into a minute (and a day).
const START: u64 = 1_795_824_010_000;

fn book(yaml: &str) -> (Arc<BudgetBook>, Arc<AtomicU64>) {
    let plan: BudgetPlan = serde_saphyr::from_str(yaml).expect("a plan");
    let now = Arc::new(AtomicU64::new(START));
    let clock = Arc::clone(&now);
    let book = BudgetBook::with_clock(Some(plan), Arc::new(move || clock.load(Ordering::SeqCst)));
    (Arc::new(book), now)
}

fn caller(subject: &str, tenant: &str) -> Caller {
    Caller::known(Known {
        principal: Principal {
            issuer: None,
            subject: subject.to_owned(),
            tenant: Some(tenant.to_owned()),
        },
        scopes: std::collections::BTreeSet::new(),
        admin: false,
        via: Via::ApiKey,
    })
}

#[tokio::test]
async fn turns_per_minute_refuses_until_the_minute_ends_to_the_second() {
    let (book, now) = book("default: { turns_per_minute: 2 }");
    let ci = caller("ci-bot", "acme");
    let first = book.admit(book.scopes(&ci, "a")).await.expect("first");
    drop(first);
    let _second = book.admit(book.scopes(&ci, "a")).await.expect("second");
    let refused = book.admit(book.scopes(&ci, "a")).await.expect_err("third");
    assert_eq!(refused.limit, LimitKind::TurnsPerMinute);
    assert_eq!(refused.scope, ScopeKind::Principal);
    assert_eq!(refused.name, "ci-bot");
    assert_eq!(refused.retry_after, Some(Duration::from_secs(50)));
    assert!(
        book.admit(book.scopes(&caller("other", "acme"), "a"))
            .await
            .is_ok(),
        "another principal has its own default budget"
    );
    now.fetch_add(49_500, Ordering::SeqCst);
    let refused = book
        .admit(book.scopes(&ci, "a"))
        .await
        .expect_err("still this minute");
    assert_eq!(refused.retry_after, Some(Duration::from_secs(1)));
    now.fetch_add(500, Ordering::SeqCst);
    assert!(
        book.admit(book.scopes(&ci, "a")).await.is_ok(),
        "a new minute"
    );
}

#[tokio::test]
async fn a_refused_turn_tells_where_every_windowed_limit_stood_as_it_refused() {
    let (book, now) = book(
        "default: { turns_per_minute: 2 }\ntenants: { acme: { tokens_per_day: 1000, cost_per_day: 5 } }",
    );
    let ci = caller("ci-bot", "acme");
    drop(book.admit(book.scopes(&ci, "a")).await.expect("first"));
    drop(book.admit(book.scopes(&ci, "a")).await.expect("second"));
    let refused = book.admit(book.scopes(&ci, "a")).await.expect_err("third");
    let policies: Vec<(&str, u64, u64, u64)> = refused
        .rate_limits
        .iter()
        .map(|l| (l.policy.as_str(), l.quota, l.remaining, l.reset_secs))
        .collect();
    // Ten seconds into the minute (and the day): the refusing limit has nothing left and
    // resets when Retry-After says; cost has no item.
    assert_eq!(
        policies,
        vec![
            ("principal-turns_per_minute", 2, 0, 50),
            ("tenant-tokens_per_day", 1000, 1000, 86_390),
        ]
    );
    assert_eq!(refused.retry_after, Some(Duration::from_secs(50)));
    // Asked later, the standing has moved on; the refusal kept its own instant.
    now.fetch_add(60_000, Ordering::SeqCst);
    assert_eq!(book.rate_limits(&ci, "a")[0].remaining, 2);
    assert_eq!(refused.rate_limits[0].remaining, 0);
}

#[tokio::test]
async fn concurrent_turns_count_until_the_turn_is_dropped() {
    let (book, _) = book("tenants: { acme: { concurrent_turns: 1 } }");
    let one = book
        .admit(book.scopes(&caller("x", "acme"), "a"))
        .await
        .expect("one");
    assert_eq!(book.health().map(|h| h.held_turns), Some(1));
    let refused = book
        .admit(book.scopes(&caller("y", "acme"), "a"))
        .await
        .expect_err("the tenant's total");
    assert_eq!(
        (refused.scope, refused.limit),
        (ScopeKind::Tenant, LimitKind::ConcurrentTurns)
    );
    assert!(
        book.admit(book.scopes(&caller("y", "globex"), "a"))
            .await
            .is_ok(),
        "another tenant has no budget here"
    );
    let health = book.health().expect("a plan");
    assert_eq!((health.tenants, health.refusing_now), (1, 1));
    assert!(
        !serde_json::to_string(&health)
            .expect("JSON")
            .contains("acme"),
        "/healthz names no one"
    );
    drop(one);
    assert!(
        book.admit(book.scopes(&caller("y", "acme"), "a"))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn tokens_are_reserved_then_settled_and_a_spent_window_refuses_the_next_turn() {
    let (book, now) = book("tenants: { acme: { tokens_per_minute: 1000 } }");
    let acme = caller("x", "acme");
    let turn = book.admit(book.scopes(&acme, "a")).await.expect("admitted");
    let call = turn.reserve(300, 2_000, "openai.gpt").await.expect("room");
    // The reservation took all that was left: a second call waits.
    assert!(matches!(
        turn.reserve(10, 10, "openai.gpt").await,
        Err(CallRefused::Wait(_))
    ));
    call.settle(400, 0).await;
    let call = turn
        .reserve(100, 100, "openai.gpt")
        .await
        .expect("600 left");
    call.settle(700, 0).await;
    let refused = book
        .admit(book.scopes(&acme, "a"))
        .await
        .expect_err("spent");
    assert_eq!(refused.limit, LimitKind::TokensPerMinute);
    assert_eq!(refused.retry_after, Some(Duration::from_secs(50)));
    assert!(
        book.admit(book.scopes(&caller("y", "globex"), "a"))
            .await
            .is_ok()
    );
    now.fetch_add(50_000, Ordering::SeqCst);
    assert!(
        book.admit(book.scopes(&acme, "a")).await.is_ok(),
        "served again"
    );
}

#[tokio::test]
async fn a_call_that_never_answers_gives_its_tokens_back() {
    let (book, _) = book("default: { tokens_per_day: 100 }");
    let turn = book
        .admit(book.scopes(&Caller::Anyone, "a"))
        .await
        .expect("admitted");
    let call = turn.reserve(50, 50, "openai.gpt").await.expect("room");
    assert!(matches!(
        turn.reserve(1, 1, "openai.gpt").await,
        Err(CallRefused::Stop(_))
    ));
    drop(call);
    assert!(
        turn.reserve(1, 1, "openai.gpt").await.is_ok(),
        "the dropped call's tokens came back"
    );
}

#[tokio::test]
async fn a_turn_past_tokens_per_turn_stops_naming_the_agent() {
    let (book, _) = book("agents: { researcher: { tokens_per_turn: 1000 } }");
    let turn = book
        .admit(book.scopes(&Caller::Anyone, "researcher"))
        .await
        .expect("admitted");
    turn.reserve(100, 4_000, "openai.gpt")
        .await
        .expect("room")
        .settle(950, 0)
        .await;
    let Err(CallRefused::Stop(refused)) = turn.reserve(100, 4_000, "openai.gpt").await else {
        panic!("the turn would pass its tokens");
    };
    assert_eq!(
        (refused.scope, refused.name.as_str(), refused.limit),
        (ScopeKind::Agent, "researcher", LimitKind::TokensPerTurn)
    );
    assert_eq!(refused.retry_after, None);
    assert!(refused.to_string().contains("tokens_per_turn"), "{refused}");
    let other = book
        .admit(book.scopes(&Caller::Anyone, "writer"))
        .await
        .expect("admitted");
    assert!(
        other.reserve(100, 4_000, "openai.gpt").await.is_ok(),
        "another agent has no budget"
    );
}

/// A resumed turn counts what its calls used before its runtime stopped: crashing does not
/// reset `tokens_per_turn`.
#[tokio::test]
async fn a_resumed_turn_counts_its_tokens_before_the_resume_against_tokens_per_turn() {
    let (book, _) = book("agents: { researcher: { tokens_per_turn: 1000 } }");
    let resumed = book
        .admit(book.scopes(&Caller::Anyone, "researcher"))
        .await
        .expect("admitted");
    resumed.spent_before(950);
    let Err(CallRefused::Stop(refused)) = resumed.reserve(100, 4_000, "openai.gpt").await else {
        panic!("the turn's tokens before the resume count");
    };
    assert_eq!(refused.limit, LimitKind::TokensPerTurn);
    let fresh = book
        .admit(book.scopes(&Caller::Anyone, "researcher"))
        .await
        .expect("admitted");
    assert!(fresh.reserve(100, 4_000, "openai.gpt").await.is_ok());
}

/// The caller of a resumed turn is the principal its record names: held to its own budgets and
/// its tenant's, as the turn's first caller was.
#[tokio::test]
async fn a_resumed_callers_scopes_are_its_principals_and_its_tenants() {
    let (book, _) =
        book("default: { turns_per_minute: 5 }\ntenants: { acme: { tokens_per_day: 10 } }");
    let principal = crate::platform::identity::Principal {
        issuer: None,
        subject: "acme-bot".to_owned(),
        tenant: Some("acme".to_owned()),
    };
    let scopes = book.scopes(&Caller::resumed(Some(principal)), "agent");
    let named: Vec<(ScopeKind, &str)> = scopes.0.iter().map(|(k, n, _)| (*k, &**n)).collect();
    assert_eq!(
        named,
        [
            (ScopeKind::Principal, "acme-bot"),
            (ScopeKind::Tenant, "acme")
        ]
    );
    let anyone = book.scopes(&Caller::resumed(None), "agent");
    assert_eq!(
        anyone.0.len(),
        1,
        "with authentication off, the one default principal"
    );
}

#[tokio::test]
async fn with_no_plan_nothing_is_held() {
    let book = Arc::new(BudgetBook::new(None));
    assert_eq!(book.health(), None, "/healthz says nothing of budgets");
    let turn = book
        .admit(book.scopes(&Caller::Anyone, "a"))
        .await
        .expect("admitted");
    turn.reserve(u64::MAX, u64::MAX, "openai.gpt")
        .await
        .expect("no limit")
        .settle(u64::MAX, 0)
        .await;
}

#[tokio::test]
async fn metrics_count_spending_refusals_and_what_is_left_with_names_folded_past_the_cap() {
    let plan: BudgetPlan =
        serde_saphyr::from_str("default: { tokens_per_minute: 1000, turns_per_minute: 1 }")
            .expect("a plan");
    let metrics = Arc::new(Metrics::new());
    let book = Arc::new(
        BudgetBook::with_clock(Some(plan), Arc::new(|| START)).counted_in(Arc::clone(&metrics)),
    );
    // BUDGET_METRIC_NAMES=10.
    let cap = 10;
    book.name_in_metrics_at_most(cap);
    let acme = caller("acme-bot", "acme");
    let turn = book.admit(book.scopes(&acme, "a")).await.expect("admitted");
    turn.reserve(10, 10, "openai.gpt")
        .await
        .expect("room")
        .settle(250, 0)
        .await;
    assert!(
        book.admit(book.scopes(&acme, "a")).await.is_err(),
        "one turn a minute"
    );
    for n in 0..cap + 5 {
        let bot = caller(&format!("bot-{n}"), "acme");
        let _first = book
            .admit(book.scopes(&bot, "a"))
            .await
            .expect("its own minute");
        assert!(book.admit(book.scopes(&bot, "a")).await.is_err(), "refused");
    }
    let text = metrics.render();
    let line = |prefix: &str| {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in {text}"))
            .to_owned()
    };
    assert!(
        line("daedalus_runtime_budget_tokens_total{scope=\"principal\",name=\"acme-bot\"}")
            .ends_with(" 250")
    );
    assert!(line(
        "daedalus_runtime_budget_remaining{scope=\"principal\",name=\"acme-bot\",limit=\"tokens_per_minute\"}"
    )
    .ends_with(" 750"));
    assert!(line(
        "daedalus_runtime_budget_refusals_total{scope=\"principal\",name=\"acme-bot\",limit=\"turns_per_minute\"}"
    )
    .ends_with(" 1"));
    let principals: std::collections::BTreeSet<&str> = text
        .lines()
        .filter(|l| l.starts_with("daedalus_runtime_budget_refusals_total{scope=\"principal\""))
        .filter_map(|l| l.split("name=\"").nth(1)?.split('"').next())
        .collect();
    assert!(
        principals.contains("other"),
        "names past the cap are folded"
    );
    assert_eq!(
        principals.len(),
        cap + 1,
        "{cap} names of their own (acme-bot's among them), and other: {principals:?}"
    );
}

/// A book on `clock`, its usage saved in the SQLite file at `path`.
fn saved_book(yaml: &str, path: &str, clock: &Arc<AtomicU64>) -> Arc<BudgetBook> {
    let plan: BudgetPlan = serde_saphyr::from_str(yaml).expect("a plan");
    let clock = Arc::clone(clock);
    let book = BudgetBook::with_clock(Some(plan), Arc::new(move || clock.load(Ordering::SeqCst)));
    let saved = crate::stores::budget_usage::SavedUsage::on(
        &crate::stores::sqlite_file::SqliteFile::open(path).expect("the file"),
    )
    .expect("the table");
    book.save_to(Arc::new(saved)).expect("read back");
    Arc::new(book)
}

#[tokio::test]
async fn a_restart_on_the_same_sqlite_file_keeps_what_the_day_and_the_minute_spent() {
    let dir = tempfile::tempdir().expect("a dir");
    let path = dir.path().join("tasks.db");
    let path = path.to_str().expect("utf-8");
    let yaml = "default: { tokens_per_minute: 10000, tokens_per_day: 1000 }";
    let now = Arc::new(AtomicU64::new(START));
    let acme = caller("acme-bot", "acme");

    let first = saved_book(yaml, path, &now);
    let turn = first
        .admit(first.scopes(&acme, "a"))
        .await
        .expect("admitted");
    turn.reserve(10, 10, "openai.gpt")
        .await
        .expect("room")
        .settle(600, 0)
        .await;
    drop(turn);
    first.close().await;

    let second = saved_book(yaml, path, &now);
    let turn = second
        .admit(second.scopes(&acme, "a"))
        .await
        .expect("400 left");
    turn.reserve(10, 10, "openai.gpt")
        .await
        .expect("room")
        .settle(500, 0)
        .await;
    drop(turn);
    second.close().await;

    let third = saved_book(yaml, path, &now);
    let refused = third
        .admit(third.scopes(&acme, "a"))
        .await
        .expect_err("the day's 1,000 were spent over two runs");
    assert_eq!(refused.limit, LimitKind::TokensPerDay);
    assert_eq!(
        third.rate_limits(&acme, "a")[0].remaining,
        10_000 - 1_100,
        "the minute's count came back too"
    );

    now.fetch_add(DAY_MS, Ordering::SeqCst);
    let next_day = saved_book(yaml, path, &now);
    assert!(
        next_day.admit(next_day.scopes(&acme, "a")).await.is_ok(),
        "a window that is over is not read back"
    );
}

#[tokio::test]
async fn the_saver_writes_changed_windows_while_it_runs() {
    let dir = tempfile::tempdir().expect("a dir");
    let path = dir.path().join("tasks.db");
    let path = path.to_str().expect("utf-8");
    let yaml = "default: { tokens_per_day: 1000 }";
    let now = Arc::new(AtomicU64::new(START));
    let acme = caller("acme-bot", "acme");
    let book = saved_book(yaml, path, &now);
    let writer = tokio::spawn({
        let book = Arc::clone(&book);
        async move { book.keep_written().await }
    });
    let turn = book.admit(book.scopes(&acme, "a")).await.expect("admitted");
    turn.reserve(10, 10, "openai.gpt")
        .await
        .expect("room")
        .settle(1_000, 0)
        .await;
    // No close: what a crash after the writer's next round leaves.
    let mut tries = 0;
    let read_back = loop {
        tries += 1;
        assert!(tries < 100, "the writer saved nothing in ten seconds");
        let saved = crate::stores::budget_usage::SavedUsage::on(
            &crate::stores::sqlite_file::SqliteFile::open(path).expect("the file"),
        )
        .expect("the table");
        let windows = kept::windows_on(saved.load().expect("read"), now.load(Ordering::SeqCst));
        if let Some(window) = windows.first() {
            break window.3.used;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(read_back, 1_000);
    writer.abort();
}

#[tokio::test]
async fn cost_per_day_counts_each_calls_tokens_at_its_models_price_and_stops_the_turn() {
    let plan: BudgetPlan =
        serde_saphyr::from_str("tenants: { acme: { cost_per_day: 1.0 } }").expect("a plan");
    let mut plan = plan;
    // 2 per million input tokens, 8 per million output: 2,000 and 8,000 millionths a token.
    plan.prices.insert(
        "openai.gpt".to_owned(),
        crate::config::deployment::budgets::Price {
            input_nanos: 2_000,
            output_nanos: 8_000,
        },
    );
    let now = Arc::new(AtomicU64::new(START));
    let clock = Arc::clone(&now);
    let book = Arc::new(BudgetBook::with_clock(
        Some(plan),
        Arc::new(move || clock.load(Ordering::SeqCst)),
    ));
    let acme = caller("acme-bot", "acme");
    let turn = book.admit(book.scopes(&acme, "a")).await.expect("admitted");
    // 100,000 input and 50,000 output tokens: 0.2 + 0.4 = 0.6 of the day's 1.0.
    turn.reserve(1_000, 1_000, "openai.gpt")
        .await
        .expect("room")
        .settle(150_000, 50_000)
        .await;
    assert_eq!(
        book.usage().used(
            ScopeKind::Tenant,
            &Arc::from("acme"),
            LimitKind::CostPerDay,
            START
        ),
        600_000,
        "in millionths"
    );
    // A call that may cost 0.5 takes the 0.4 left; it then costs 0.5.
    turn.reserve(0, 62_500, "openai.gpt")
        .await
        .expect("the room left")
        .settle(62_500, 62_500)
        .await;
    let Err(CallRefused::Stop(refused)) = turn.reserve(10, 10, "openai.gpt").await else {
        panic!("the day's cost is spent: the turn stops");
    };
    assert_eq!(refused.limit, LimitKind::CostPerDay);
    assert!(
        refused.to_string().contains("allows 1.00 cost per day"),
        "{refused}"
    );
    assert!(
        book.rate_limits(&acme, "a").is_empty(),
        "cost has no RateLimit item"
    );
    let refused = book
        .admit(book.scopes(&acme, "a"))
        .await
        .expect_err("spent for the day");
    assert_eq!(refused.limit, LimitKind::CostPerDay);
    assert_eq!(refused.retry_after, Some(Duration::from_secs(86_390)));
}
