//! The translator's stream against the Task it closes with: chunks, steps, artifacts the
//! agent streams itself, a listener far behind.

use daedalus_contract::TaskRebuilder;

use super::*;
use crate::agents::agent_loop::AgentOutcome;
use crate::agents::llm::Usage;

fn delta(text: &str) -> LoopEvent {
    LoopEvent::TextDelta {
        agent: "a".into(),
        depth: 0,
        text: text.into(),
    }
}

fn step_started(step: u32) -> LoopEvent {
    LoopEvent::LlmTurnStarted {
        agent: "a".into(),
        depth: 0,
        step,
    }
}

fn drain(events: &mut EventReceiver) -> Vec<StreamEvent> {
    let mut out = Vec::new();
    while let Ok((event, size)) = events.rx.try_recv() {
        events.queued.fetch_sub(size, Ordering::Relaxed);
        out.push(*event);
    }
    out
}

/// Runs `loop_events` through a translator, closes it with `outcome`'s Task, and checks
/// the stream rebuilds to exactly that Task; returns the stream and the Task.
fn translate(loop_events: &[LoopEvent], outcome: AgentOutcome) -> (Vec<StreamEvent>, Task) {
    let (out, mut events) = queue();
    let mut translator = Translator::open("t", "c", out);
    for event in loop_events {
        translator.on_event(event);
    }
    let mut task = crate::services::turns::task::finish("t", "c", outcome);
    let closing = translator.close(&mut task);
    let mut stream = drain(&mut events);
    stream.extend(closing);
    let mut rebuilt = TaskRebuilder::new();
    for event in &stream {
        rebuilt.apply(event).expect("a valid stream");
    }
    assert!(rebuilt.is_final());
    let rebuilt = rebuilt.into_task().expect("a task");
    assert_eq!(
        rebuilt.artifacts, task.artifacts,
        "the stream agrees with the Task"
    );
    assert_eq!(rebuilt.status, task.status);
    (stream, task)
}

fn completed(text: &str) -> AgentOutcome {
    AgentOutcome::Completed {
        artifacts: vec![Artifact::text("made-by-the-loop", text).named("response")],
    }
}

fn chunks(stream: &[StreamEvent]) -> Vec<(String, bool, bool)> {
    stream
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ArtifactUpdate(u) => Some((
                u.artifact.parts[0].as_text().unwrap_or_default().to_owned(),
                u.append,
                u.last_chunk,
            )),
            _ => None,
        })
        .collect()
}

#[test]
fn text_streams_as_chunks_of_one_artifact_and_the_task_keeps_its_id() {
    let (stream, task) = translate(
        &[step_started(1), delta("The answer"), delta(" is 4.")],
        completed("The answer is 4."),
    );
    assert!(
        matches!(stream.first(), Some(StreamEvent::Task(t)) if t.status.state == TaskState::Submitted)
    );
    assert!(
        matches!(&stream[1], StreamEvent::StatusUpdate(u) if u.status.state == TaskState::Working && !u.r#final)
    );
    assert!(
        matches!(stream.last(), Some(StreamEvent::StatusUpdate(u)) if u.r#final && u.status.state == TaskState::Completed)
    );
    assert_eq!(
        chunks(&stream),
        [
            ("The answer".to_owned(), false, false),
            (" is 4.".to_owned(), true, false),
            (String::new(), true, true),
        ]
    );
    let StreamEvent::ArtifactUpdate(first) = &stream[3] else {
        panic!("the first chunk follows the step's status: {stream:?}");
    };
    assert_eq!(task.artifacts[0].artifact_id, first.artifact.artifact_id);
}

#[test]
fn text_before_a_tool_call_is_replaced_by_the_next_step_and_a_retry_starts_over() {
    let tool_step = LoopEvent::LlmTurnFinished {
        agent: "a".into(),
        depth: 0,
        step: 1,
        model: "m".into(),
        usage: Usage::default(),
        tool_calls: 1,
    };
    let retry = LoopEvent::LlmRetrying {
        agent: "a".into(),
        depth: 0,
        attempt: 1,
    };
    let (stream, _) = translate(
        &[
            step_started(1),
            delta("Let me look."),
            tool_step,
            step_started(2),
            delta("It is"),
            retry,
            delta("It is 4."),
        ],
        completed("It is 4."),
    );
    assert_eq!(
        chunks(&stream),
        [
            ("Let me look.".to_owned(), false, false),
            ("It is".to_owned(), false, false),
            ("It is 4.".to_owned(), false, false),
            (String::new(), true, true),
        ]
    );
}

#[test]
fn a_listener_far_behind_misses_chunks_but_gets_the_answer_whole() {
    let big = "x".repeat(64 * 1024);
    let deltas: Vec<LoopEvent> = (0..40).map(|_| delta(&big)).collect();
    let whole = big.repeat(40);
    let (stream, _) = translate(&deltas, completed(&whole));
    let sent = chunks(&stream);
    assert!(sent.len() < 41, "some chunks were dropped: {}", sent.len());
    let last = sent.last().expect("the answer");
    assert_eq!((last.0.len(), last.1, last.2), (whole.len(), false, true));
}

#[test]
fn text_streamed_before_a_failure_stays_in_the_task() {
    let (_, task) = translate(
        &[step_started(1), delta("Partial")],
        AgentOutcome::Failed {
            reason: "the model call failed".into(),
        },
    );
    assert_eq!(task.status.state, TaskState::Failed);
    assert_eq!(task.artifacts[0].parts, vec![Part::text("Partial")]);
}

fn own_chunk(id: &str, part: Part, append: bool, last_chunk: bool) -> LoopEvent {
    LoopEvent::ArtifactChunk {
        agent: "a".into(),
        depth: 0,
        artifact: Artifact::new(id, vec![part]),
        append,
        last_chunk,
    }
}

fn whole(id: &str, parts: Vec<Part>) -> AgentOutcome {
    AgentOutcome::Completed {
        artifacts: vec![Artifact::new(id, parts)],
    }
}

#[test]
fn an_artifact_the_agent_streams_in_chunks_is_not_sent_again() {
    let (stream, task) = translate(
        &[
            own_chunk("f", Part::text("chunk-1 "), false, false),
            own_chunk("f", Part::text("chunk-2"), true, true),
        ],
        whole("f", vec![Part::text("chunk-1 chunk-2")]),
    );
    assert_eq!(
        chunks(&stream),
        [
            ("chunk-1 ".to_owned(), false, false),
            ("chunk-2".to_owned(), true, true),
        ],
        "closed by the agent: no whole copy at the end"
    );
    assert_eq!(task.artifacts.len(), 1);
}

#[test]
fn an_own_artifact_left_open_or_different_goes_out_whole_and_a_stray_append_begins_one() {
    let file = Part::from_content(daedalus_contract::PartContent::Raw("dGNr".into()));
    // An append to nothing begins the artifact (append: false on the wire); left open, it
    // is sent whole at the end.
    let (stream, _) = translate(
        &[own_chunk("f", file.clone(), true, false)],
        whole("f", vec![file.clone()]),
    );
    let updates: Vec<(bool, bool)> = stream
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ArtifactUpdate(u) => Some((u.append, u.last_chunk)),
            _ => None,
        })
        .collect();
    assert_eq!(updates, [(false, false), (false, true)]);
    // Streamed, but the outcome forgot it: the Task still holds it (translate checks the
    // stream rebuilds to the Task).
    let (_, task) = translate(
        &[own_chunk("g", Part::text("kept"), false, true)],
        whole("other", vec![Part::text("answer")]),
    );
    let ids: Vec<&str> = task
        .artifacts
        .iter()
        .map(|a| a.artifact_id.as_str())
        .collect();
    assert_eq!(ids, ["g", "other"], "in the order a listener saw them");
}

#[test]
fn nothing_is_translated_for_nobody() {
    let (out, events) = queue();
    drop(events);
    let translator = Translator::open("t", "c", out);
    assert!(!translator.is_listening());
}

#[test]
fn steps_read_as_daedalus_expects() {
    let cases = [
        (
            LoopEvent::LlmTurnStarted {
                agent: "harper".into(),
                depth: 0,
                step: 2,
            },
            Some("harper step 2 (llm)"),
        ),
        (
            LoopEvent::LlmTurnFinished {
                agent: "harper".into(),
                depth: 0,
                step: 3,
                model: "m".into(),
                usage: Usage::default(),
                tool_calls: 2,
            },
            Some("harper step 3 (tool)"),
        ),
        (
            LoopEvent::LlmTurnFinished {
                agent: "harper".into(),
                depth: 0,
                step: 4,
                model: "m".into(),
                usage: Usage::default(),
                tool_calls: 0,
            },
            None,
        ),
        (
            LoopEvent::ToolStarted {
                agent: "harper".into(),
                depth: 0,
                step: 1,
                server: "argos".into(),
                tool: "search_web".into(),
                call_id: "c".into(),
            },
            Some("argos/search_web: started"),
        ),
        (
            LoopEvent::ToolFailed {
                agent: "harper".into(),
                depth: 1,
                step: 1,
                server: "argos".into(),
                tool: "search_web".into(),
                call_id: "c".into(),
                reason: "down".into(),
                elapsed_ms: 3,
            },
            Some("argos/search_web: failed"),
        ),
    ];
    for (event, expected) in cases {
        assert_eq!(step_text(&event).as_deref(), expected, "{event:?}");
    }
}
