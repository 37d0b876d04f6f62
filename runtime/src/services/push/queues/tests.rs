//! The queues' bounds, shares and markers, state by state.

use super::*;

fn target(host: &str) -> Target {
    Target {
        url: reqwest::Url::parse(&format!("https://{host}/a")).unwrap(),
        token: None,
        authentication: None,
    }
}

fn at(host: &str) -> Owner {
    Owner {
        host: host.to_owned(),
        tenant: None,
    }
}

fn pending(revision: u64, size: usize) -> Pending {
    Pending::body(revision, Bytes::from(vec![b'x'; size]))
}

fn key(task: &str) -> QueueKey {
    (task.to_owned(), "c".to_owned())
}

/// Queues a state of `size` bytes at `revision` for `task`'s webhook at `host`.
fn push(q: &mut Queues, task: &str, host: &str, revision: u64, size: usize) -> Enqueued {
    q.push(&key(task), target(host), at(host), pending(revision, size))
}

/// What waits for `key`, head first: (revision, whether it carries its body).
fn waiting(q: &Queues, key: &QueueKey) -> Vec<(u64, bool)> {
    q.queues.get(key).map_or_else(Vec::new, |queue| {
        queue
            .pending
            .iter()
            .map(|p| (p.revision, matches!(p.payload, Payload::Body(_))))
            .collect()
    })
}

/// Delivers everything that waits for `key` (each head taken, then done), and answers the
/// revisions delivered, with whether each went as its body.
fn deliver_all(q: &mut Queues, key: &QueueKey) -> Vec<(u64, bool)> {
    let mut got = Vec::new();
    while q.next(key).is_some() {
        let (_, head) = q.take(key).expect("a head to take");
        let bytes = match &head.payload {
            Payload::Body(body) => body.len(),
            Payload::AsItStands => {
                q.read_back(1000);
                1000
            }
        };
        got.push((head.revision, matches!(head.payload, Payload::Body(_))));
        q.done(key, bytes);
    }
    got
}

/// Every count back at zero: nothing waits, nothing is charged.
fn assert_empty(q: &Queues) {
    assert_eq!((q.bytes(), q.len(), q.markers()), (0, 0, 0));
    assert_eq!(q.delivering(), (0, 0));
    assert!(
        q.queues.is_empty(),
        "{:?}",
        q.queues.keys().collect::<Vec<_>>()
    );
    assert!(q.tasks.held.is_empty() && q.hosts.held.is_empty() && q.tenants.held.is_empty());
    assert_eq!(
        (
            q.tasks.with_bodies,
            q.hosts.with_bodies,
            q.tenants.with_bodies
        ),
        (0, 0, 0)
    );
}

#[test]
fn states_wait_in_order_and_the_first_starts_a_worker() {
    let mut q = Queues::new(1 << 20);
    assert!(push(&mut q, "t", "h", 1, 10).start);
    assert!(!push(&mut q, "t", "h", 2, 10).start);
    assert_eq!(deliver_all(&mut q, &key("t")), [(1, true), (2, true)]);
    assert_empty(&q);
    assert!(push(&mut q, "t", "h", 3, 10).start, "idle again");
}

#[test]
fn a_state_in_delivery_leaves_the_queues_bytes_and_is_never_made_a_marker() {
    let mut q = Queues::new(100);
    push(&mut q, "t", "h", 1, 60);
    q.next(&key("t")).unwrap();
    let (_, head) = q.take(&key("t")).unwrap();
    assert_eq!(head.revision, 1);
    assert_eq!((q.bytes(), q.delivering()), (0, (1, 60)));
    assert!(
        q.take(&key("t")).is_none(),
        "one delivery a webhook at once"
    );
    assert!(
        q.next(&key("t")).is_none(),
        "its worker goes on; no other starts"
    );
    // The room the delivery left takes another 60 bytes, as a body.
    push(&mut q, "t", "h", 2, 60);
    assert_eq!(waiting(&q, &key("t")), [(1, true), (2, true)]);
    q.done(&key("t"), 60);
    assert_eq!(deliver_all(&mut q, &key("t")), [(2, true)]);
    assert_empty(&q);
}

#[test]
fn at_the_bound_the_newest_state_is_kept_and_the_waiting_ones_make_room() {
    let mut q = Queues::new(100);
    push(&mut q, "t", "h", 1, 40);
    push(&mut q, "t", "h", 2, 40);
    let third = push(&mut q, "t", "h", 3, 40);
    assert_eq!(
        (third.superseded, third.owed, third.given_up),
        (1, 0, false)
    );
    assert_eq!(
        waiting(&q, &key("t")),
        [(2, true), (3, true)],
        "1 made room"
    );
    assert!(q.bytes() <= 100);
    assert_eq!(q.forget(&key("t")), 2);
    assert_empty(&q);
}

/// The defect: every webhook on one hanging host held a small `WORKING` state, 8 of them in
/// delivery, and each task's large `COMPLETED` found the bytes held by the ends of the tasks
/// before it: 140 ends given up, and another host's states with them. Now the waiting bodies
/// become markers: no end is given up, the hanging host holds at most its share in bodies,
/// and another host's states wait with their bodies.
#[test]
fn one_hanging_host_gives_up_no_end_and_leaves_another_host_room() {
    let limit = 8 << 20;
    let mut q = Queues::new(limit);
    let tasks = 800;
    for t in 0..tasks {
        push(&mut q, &format!("t{t}"), "hanging", 1, 300);
    }
    // The host takes 8 deliveries at once, and answers none of them.
    for t in 0..PER_HOST {
        q.next(&key(&format!("t{t}"))).unwrap();
        q.take(&key(&format!("t{t}"))).unwrap();
    }
    let mut owed = 0;
    for t in 0..tasks {
        let done = push(&mut q, &format!("t{t}"), "hanging", 2, 384 << 10);
        assert!(!done.given_up, "task {t}: its end is kept in some form");
        owed += done.owed;
        let last = *waiting(&q, &key(&format!("t{t}"))).last().unwrap();
        assert_eq!(last.0, 2, "task {t}: the newest state waits");
        assert!(q.bytes() <= limit);
        // Halfway, another host's small states arrive: they wait with their bodies at once,
        // the hanging host's making room.
        if t == tasks / 2 {
            for o in 0..3 {
                let done = push(&mut q, &format!("other{o}"), "other", 2, 2000);
                assert_eq!((done.given_up, done.owed), (false, 0), "{done:?}");
            }
        }
    }
    assert!(owed > 700, "most ends wait as markers: {owed}");
    for o in 0..3 {
        assert_eq!(waiting(&q, &key(&format!("other{o}"))), [(2, true)]);
    }
    assert!(
        q.hosts.body_bytes("hanging") <= limit / 2,
        "with two hosts waiting, the hanging one holds at most half the bound in bodies: {}",
        q.hosts.body_bytes("hanging")
    );
    // The host answers again: every task gets its end, as its body or as it stands.
    for t in 0..PER_HOST {
        q.done(&key(&format!("t{t}")), 300);
    }
    for t in 0..tasks {
        let got = deliver_all(&mut q, &key(&format!("t{t}")));
        assert_eq!(got.last().map(|g| g.0), Some(2), "task {t}: {got:?}");
    }
    for o in 0..3 {
        assert_eq!(deliver_all(&mut q, &key(&format!("other{o}"))), [(2, true)]);
    }
    assert_empty(&q);
}

#[test]
fn at_the_global_bound_the_largest_waiting_bodies_of_any_task_become_markers() {
    let mut q = Queues::new(10_000);
    // Four hosts, so each may hold a quarter in bodies.
    push(&mut q, "big", "a", 1, 2_500);
    push(&mut q, "mid", "b", 1, 2_000);
    push(&mut q, "small", "c", 1, 1_000);
    push(&mut q, "d1", "d", 1, 2_300);
    push(&mut q, "d2", "d", 1, 100);
    // 7,900 bytes wait; 2,400 more need room: the largest queue goes first.
    let done = push(&mut q, "e", "e", 1, 2_400);
    assert!(!done.given_up && done.owed >= 1, "{done:?}");
    assert_eq!(
        waiting(&q, &key("e")),
        [(1, true)],
        "the arriving state keeps its body"
    );
    assert_eq!(
        waiting(&q, &key("big")),
        [(1, false)],
        "the largest became a marker"
    );
    assert_eq!(
        waiting(&q, &key("small")),
        [(1, true)],
        "the smallest kept its body"
    );
    assert!(q.bytes() <= 10_000);
}

#[test]
fn one_host_holds_at_most_its_share_of_bodies_while_others_wait() {
    let mut q = Queues::new(4_000);
    push(&mut q, "x", "other", 1, 100);
    // Two hosts waiting: one may hold half the bound in bodies.
    for t in 0..10 {
        push(&mut q, &format!("t{t}"), "busy", 1, 500);
        assert!(q.hosts.body_bytes("busy") <= 2_000);
    }
    assert!(
        q.markers() > 0,
        "the busy host's bodies past its share are markers"
    );
    // Alone, a host may take the whole bound.
    let mut alone = Queues::new(4_000);
    for t in 0..7 {
        push(&mut alone, &format!("t{t}"), "busy", 1, 500);
    }
    assert_eq!((alone.markers(), alone.bytes()), (0, 3_500));
}

#[test]
fn one_tenant_holds_at_most_its_share_of_bodies_across_hosts() {
    let mut q = Queues::new(4_000);
    let tenant = |t: &str, host: &str| Owner {
        host: host.to_owned(),
        tenant: Some(t.to_owned()),
    };
    q.push(
        &key("g"),
        target("h9"),
        tenant("globex", "h9"),
        pending(1, 100),
    );
    for t in 0..10 {
        // Each of acme's webhooks on a host of its own: only the tenant's share holds them.
        let host = format!("h{t}");
        q.push(
            &key(&format!("acme{t}")),
            target(&host),
            tenant("acme", &host),
            pending(1, 500),
        );
        assert!(q.tenants.body_bytes("acme") <= 2_000, "{t}");
    }
    assert_eq!(waiting(&q, &key("g")), [(1, true)], "globex keeps its body");
}

#[test]
fn a_waiting_marker_takes_the_later_states_in_and_only_markers_filling_the_bound_give_up() {
    let mut q = Queues::new(1_000);
    push(&mut q, "t", "h", 1, 10);
    let big = push(&mut q, "t", "h", 2, 5_000);
    assert_eq!((big.owed, big.superseded), (1, 1), "{big:?}");
    // A later state: the marker already owes the task as it stands, now at revision 3.
    let later = push(&mut q, "t", "h", 3, 10);
    assert_eq!(later.superseded, 1);
    assert_eq!(waiting(&q, &key("t")), [(3, false)]);
    // Markers of other tasks fill the bytes: one that does not fit is given up.
    let mut given_up = None;
    for t in 0..100 {
        let done = push(&mut q, &format!("u{t}"), "h", 1, 5_000);
        if done.given_up {
            given_up = Some(t);
            assert!(!done.start, "no worker for a queue with nothing in it");
            assert!(!q.queues.contains_key(&key(&format!("u{t}"))));
            break;
        }
        assert_eq!(done.owed, 1);
    }
    let first = given_up.expect("markers fill the bound at last");
    assert!(first >= 5, "several markers fit first: {first}");
    assert!(q.bytes() <= 1_000);
}

#[test]
fn a_read_of_the_task_as_it_stands_supersedes_what_waited_behind_it() {
    let mut q = Queues::new(1 << 20);
    for revision in 1..=3 {
        push(&mut q, "t", "h", revision, 10);
    }
    q.next(&key("t")).unwrap();
    q.take(&key("t")).unwrap();
    assert_eq!(q.supersede_waiting(&key("t")), 2);
    assert_eq!(waiting(&q, &key("t")), [(1, true)]);
    q.done(&key("t"), 10);
    assert_eq!(q.supersede_waiting(&key("t")), 0, "nothing left");
    assert!(q.next(&key("t")).is_none());
    assert_empty(&q);
}

#[test]
fn one_task_holds_at_most_its_bytes_across_its_webhooks() {
    let mut q = Queues::new(usize::MAX);
    let webhook = |id: &str| ("t".to_owned(), id.to_owned());
    let half = TASK_BYTES / 2;
    q.push(&webhook("a"), target("h"), at("h"), pending(1, half));
    q.push(&webhook("b"), target("h"), at("h"), pending(1, half - 150));
    // A third webhook of the same task finds no room for the body: the task's largest
    // waiting body becomes a marker, and this one waits with its body.
    let third = q.push(&webhook("c"), target("h"), at("h"), pending(1, 200));
    assert_eq!((third.owed, third.start), (1, true), "{third:?}");
    assert_eq!(waiting(&q, &webhook("a")), [(1, false)]);
    assert_eq!(waiting(&q, &webhook("c")), [(1, true)]);
    assert!(q.tasks.bytes("t") <= TASK_BYTES);
    // Another task is not held up by this one.
    assert!(
        q.push(&key("u"), target("h"), at("h"), pending(1, 100))
            .start
    );
}

#[test]
fn a_webhook_whose_url_moves_to_another_host_takes_its_bytes_along() {
    let mut q = Queues::new(1 << 20);
    push(&mut q, "t", "old", 1, 100);
    push(&mut q, "t", "new", 2, 50);
    assert_eq!(q.hosts.bytes("old"), 0);
    assert_eq!(q.hosts.bytes("new"), 150);
    assert_eq!(q.forget(&key("t")), 2);
    assert_empty(&q);
}
