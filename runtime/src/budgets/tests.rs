//! The budget book on a clock the tests move.

use std::sync::atomic::{AtomicU64, Ordering};

use super::*;
use crate::identity::{Known, Principal, Via};

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

#[test]
fn turns_per_minute_refuses_until_the_minute_ends_to_the_second() {
    let (book, now) = book("default: { turns_per_minute: 2 }");
    let ci = caller("ci-bot", "acme");
    let first = book.admit(book.scopes(&ci, "a")).expect("first");
    drop(first);
    let _second = book.admit(book.scopes(&ci, "a")).expect("second");
    let refused = book.admit(book.scopes(&ci, "a")).expect_err("third");
    assert_eq!(refused.limit, LimitKind::TurnsPerMinute);
    assert_eq!(refused.scope, ScopeKind::Principal);
    assert_eq!(refused.name, "ci-bot");
    assert_eq!(refused.retry_after, Some(Duration::from_secs(50)));
    assert!(
        book.admit(book.scopes(&caller("other", "acme"), "a"))
            .is_ok(),
        "another principal has its own default budget"
    );
    now.fetch_add(49_500, Ordering::SeqCst);
    let refused = book
        .admit(book.scopes(&ci, "a"))
        .expect_err("still this minute");
    assert_eq!(refused.retry_after, Some(Duration::from_secs(1)));
    now.fetch_add(500, Ordering::SeqCst);
    assert!(book.admit(book.scopes(&ci, "a")).is_ok(), "a new minute");
}

#[test]
fn concurrent_turns_count_until_the_turn_is_dropped() {
    let (book, _) = book("tenants: { acme: { concurrent_turns: 1 } }");
    let one = book
        .admit(book.scopes(&caller("x", "acme"), "a"))
        .expect("one");
    let refused = book
        .admit(book.scopes(&caller("y", "acme"), "a"))
        .expect_err("the tenant's total");
    assert_eq!(
        (refused.scope, refused.limit),
        (ScopeKind::Tenant, LimitKind::ConcurrentTurns)
    );
    assert!(
        book.admit(book.scopes(&caller("y", "globex"), "a")).is_ok(),
        "another tenant has no budget here"
    );
    drop(one);
    assert!(book.admit(book.scopes(&caller("y", "acme"), "a")).is_ok());
}

#[test]
fn tokens_are_reserved_then_settled_and_a_spent_window_refuses_the_next_turn() {
    let (book, now) = book("tenants: { acme: { tokens_per_minute: 1000 } }");
    let acme = caller("x", "acme");
    let turn = book.admit(book.scopes(&acme, "a")).expect("admitted");
    let call = turn.reserve(300, 2_000).expect("room");
    // The reservation took all that was left: a second call waits.
    assert!(matches!(turn.reserve(10, 10), Err(CallRefused::Wait(_))));
    call.settle(400);
    let call = turn.reserve(100, 100).expect("600 left");
    call.settle(700);
    let refused = book.admit(book.scopes(&acme, "a")).expect_err("spent");
    assert_eq!(refused.limit, LimitKind::TokensPerMinute);
    assert_eq!(refused.retry_after, Some(Duration::from_secs(50)));
    assert!(book.admit(book.scopes(&caller("y", "globex"), "a")).is_ok());
    now.fetch_add(50_000, Ordering::SeqCst);
    assert!(book.admit(book.scopes(&acme, "a")).is_ok(), "served again");
}

#[test]
fn a_call_that_never_answers_gives_its_tokens_back() {
    let (book, _) = book("default: { tokens_per_day: 100 }");
    let turn = book
        .admit(book.scopes(&Caller::Anyone, "a"))
        .expect("admitted");
    let call = turn.reserve(50, 50).expect("room");
    assert!(matches!(turn.reserve(1, 1), Err(CallRefused::Stop(_))));
    drop(call);
    assert!(
        turn.reserve(1, 1).is_ok(),
        "the dropped call's tokens came back"
    );
}

#[test]
fn a_turn_past_tokens_per_turn_stops_naming_the_agent() {
    let (book, _) = book("agents: { researcher: { tokens_per_turn: 1000 } }");
    let turn = book
        .admit(book.scopes(&Caller::Anyone, "researcher"))
        .expect("admitted");
    turn.reserve(100, 4_000).expect("room").settle(950);
    let Err(CallRefused::Stop(refused)) = turn.reserve(100, 4_000) else {
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
        .expect("admitted");
    assert!(
        other.reserve(100, 4_000).is_ok(),
        "another agent has no budget"
    );
}

#[test]
fn with_no_plan_nothing_is_held() {
    let book = Arc::new(BudgetBook::new(None));
    let turn = book
        .admit(book.scopes(&Caller::Anyone, "a"))
        .expect("admitted");
    turn.reserve(u64::MAX, u64::MAX)
        .expect("no limit")
        .settle(u64::MAX);
}
