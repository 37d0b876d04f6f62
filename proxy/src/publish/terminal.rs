//! What `daedalus-proxy publish` shows: the command run end to end ([`run`]) with its
//! terminal output: a spinner while it waits (on a terminal), a followed stream as it comes
//! ([`Follower`]), and the result ([`describe`], or the Task as JSON with `--json`), with the
//! exit code the result's state calls for.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};

use daedalus_contract::{Message, Part, StreamEvent, Task};

use super::{Published, build_request, publish, read_stdin, trace};
use crate::config::PublishConfig;

/// `daedalus-proxy publish` with `config`: the request built (from stdin when asked),
/// published, and its outcome printed; the exit code says how it went.
pub async fn run(config: &PublishConfig) -> ExitCode {
    let request = match build_request(config, read_stdin) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("daedalus-proxy publish: {e}");
            return ExitCode::from(1);
        }
    };
    let spinner = stderr_is_tty() && config.wait && !config.json && !config.follow;
    let follower = std::cell::RefCell::new(Follower::new(stderr_is_tty()));
    let on_event = |event: &StreamEvent| {
        follower
            .borrow_mut()
            .show(event, &mut std::io::stdout(), &mut std::io::stderr());
    };
    let ticks = AtomicUsize::new(0);
    let progress = || {
        if spinner {
            let frames = ['|', '/', '-', '\\'];
            let n = ticks.fetch_add(1, Ordering::Relaxed);
            eprint!(
                "\r{} waiting for the result of {} ",
                frames[n % 4],
                request.message.effective_task_id()
            );
        }
    };
    let trace = trace(config);
    // On stderr, so `--json` output stays one document: the id to look the task up by.
    eprintln!("trace {}", trace.span.trace_id_hex());
    let outcome = publish(config, &request, &trace, progress, on_event).await;
    let follower = follower.into_inner();
    if spinner {
        eprint!("\r\x1b[2K");
    }
    match outcome {
        Ok(published) => print_outcome(config, &published, &follower),
        Err(e) => {
            eprintln!("daedalus-proxy publish: {e}");
            ExitCode::from(1)
        }
    }
}

/// Prints what publishing came to, on stdout, and the exit code it calls for.
fn print_outcome(config: &PublishConfig, published: &Published, follower: &Follower) -> ExitCode {
    let mut out = std::io::stdout();
    match published {
        Published::Sent {
            task_id,
            message_id,
            duplicate,
        } => {
            let note = if *duplicate {
                " (duplicate: already published)"
            } else {
                ""
            };
            let _ = writeln!(out, "published task {task_id} (message {message_id}){note}");
            ExitCode::SUCCESS
        }
        Published::Result(task) => {
            if config.json {
                let _ = writeln!(
                    out,
                    "{}",
                    serde_json::to_string_pretty(task.as_ref()).unwrap_or_default()
                );
            } else if follower.printed_text() {
                // The answer is on screen already: end its line, then say how it ended.
                if follower.mid_line() {
                    let _ = writeln!(out);
                }
                let _ = writeln!(out, "task {}  {}", task.id, task.status.state);
            } else {
                let _ = write!(out, "{}", describe(task));
            }
            ExitCode::from(published.exit_code())
        }
    }
}

/// Whether stderr is a terminal (the spinner is shown only then).
pub fn stderr_is_tty() -> bool {
    std::io::stderr().is_terminal()
}

/// Prints a followed stream (`--follow`): the answer's text as it arrives, each step of the
/// turn on a line of its own (dim on a terminal).
#[derive(Debug, Default)]
pub struct Follower {
    /// Step lines are dimmed (stderr is a terminal).
    dim: bool,
    /// Answer text has been printed (the result then prints only its state).
    printed_text: bool,
    /// The answer's line is open (a step line starts a new one first).
    mid_line: bool,
}

impl Follower {
    pub fn new(dim: bool) -> Self {
        Self {
            dim,
            ..Self::default()
        }
    }

    /// Shows one event: answer text on `out`, steps on `steps`.
    pub fn show(
        &mut self,
        event: &StreamEvent,
        out: &mut impl std::io::Write,
        steps: &mut impl std::io::Write,
    ) {
        match event {
            StreamEvent::ArtifactUpdate(update) => {
                let text: String = update
                    .artifact
                    .parts
                    .iter()
                    .filter_map(Part::as_text)
                    .collect();
                if text.is_empty() {
                    return;
                }
                if !update.append && self.mid_line {
                    // The answer starts over (a new step, or a retry): on a new line.
                    let _ = writeln!(out);
                }
                let _ = write!(out, "{text}");
                let _ = out.flush();
                self.printed_text = true;
                self.mid_line = !text.ends_with('\n');
            }
            StreamEvent::StatusUpdate(update) if !update.r#final => {
                let Some(step) = update.status.message.as_ref().map(Message::text) else {
                    return;
                };
                if self.mid_line {
                    let _ = writeln!(out);
                    let _ = out.flush();
                    self.mid_line = false;
                }
                let _ = if self.dim {
                    writeln!(steps, "\x1b[2m{step}\x1b[0m")
                } else {
                    writeln!(steps, "{step}")
                };
            }
            StreamEvent::StatusUpdate(_) | StreamEvent::Task(_) => {}
        }
    }

    /// Whether any answer text was printed.
    pub fn printed_text(&self) -> bool {
        self.printed_text
    }

    /// Whether the answer's last line is still open.
    pub fn mid_line(&self) -> bool {
        self.mid_line
    }
}

/// The Task for people: id, state, and the text of its message and artifacts.
pub fn describe(task: &Task) -> String {
    use std::fmt::Write as _;
    let mut out = format!("task {}  {}", task.id, task.status.state);
    if let Some(c) = &task.context_id {
        let _ = write!(out, "  (context {c})");
    }
    out.push('\n');
    if let Some(m) = &task.status.message {
        let _ = writeln!(out, "{}", m.text());
    }
    for part in task.artifacts.iter().flat_map(|a| &a.parts) {
        match part.as_text() {
            Some(text) => {
                let _ = writeln!(out, "{text}");
            }
            None => {
                let _ = writeln!(
                    out,
                    "[{} part]",
                    part.media_type.as_deref().unwrap_or("non-text")
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use daedalus_contract::{
        Artifact, Role, TaskArtifactUpdateEvent, TaskState, TaskStatus, TaskStatusUpdateEvent,
    };

    use super::*;

    fn chunk(text: &str, append: bool) -> StreamEvent {
        StreamEvent::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            artifact: Artifact::text("a", text),
            append,
            last_chunk: false,
            metadata: None,
        })
    }

    fn step(text: &str) -> StreamEvent {
        StreamEvent::StatusUpdate(TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus {
                state: TaskState::Working,
                message: Some(Message::new("m", Role::Agent, vec![Part::text(text)])),
                timestamp: None,
            },
            r#final: false,
            metadata: None,
        })
    }

    #[test]
    fn a_followed_stream_prints_text_as_it_comes_and_steps_on_lines_of_their_own() {
        let (mut out, mut steps) = (Vec::new(), Vec::new());
        let mut follower = Follower::new(true);
        for event in [
            chunk("Let me", false),
            chunk(" look.", true),
            step("f/search: started"),
            chunk("It is", false),
            chunk(" 4.", true),
        ] {
            follower.show(&event, &mut out, &mut steps);
        }
        assert_eq!(String::from_utf8(out).unwrap(), "Let me look.\nIt is 4.");
        assert_eq!(
            String::from_utf8(steps).unwrap(),
            "\x1b[2mf/search: started\x1b[0m\n"
        );
        assert!(follower.printed_text() && follower.mid_line());
    }
}
