//! The documentation as a reader meets it: the README and the pages of `docs/`, their links
//! and headings, and their shell blocks run as written.
//!
//! A block runs in a sandbox directory with the workspace's binaries and the pinned
//! `nats-server`, so what a page tells a user to type is what the test types. Three things
//! differ, each to make the run a test:
//! - The well-known ports move, so tests can run beside anything: the binaries get free
//!   ports through the variables they document (`A2A_PORT`, `PROXY_PORT`, `NATS_URL`), and
//!   shims carry the change where a command names a port itself (`nats-server` gets `-p`;
//!   `localhost:8080` and `127.0.0.1:8080` in `curl`'s and `cargo run`'s arguments become the
//!   runtime's port).
//! - `cargo run -p <package>` runs the binary this build already holds (`cargo build` has
//!   nothing left to do), and `.ci/setup` is the one `.ci/test` ran first.
//! - After a line that starts a server in the background (`… &`), the script waits for it to
//!   answer (NATS's port, the runtime's `/health`, the proxy's `/healthz`), as a user reads
//!   its first log lines before typing the next command.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::nats::free_port;

/// The workspace's root.
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the test kit sits in the workspace")
        .to_path_buf()
}

/// A Markdown file of the documentation: the README or a page of `docs/`.
#[derive(Debug, Clone)]
pub struct Document {
    /// Its path from the workspace's root (`docs/running.md`).
    pub path: PathBuf,
    /// Its text.
    pub text: String,
}

impl Document {
    /// The document at `path` (from the workspace's root).
    pub fn read(path: impl AsRef<Path>) -> Self {
        let path = path.as_ref().to_path_buf();
        let text = std::fs::read_to_string(workspace().join(&path))
            .unwrap_or_else(|e| panic!("{} reads: {e}", path.display()));
        Self { path, text }
    }

    /// The README and every page of `docs/`, the README first.
    pub fn all() -> Vec<Self> {
        let mut pages: Vec<PathBuf> = std::fs::read_dir(workspace().join("docs"))
            .expect("docs/ is there")
            .map(|entry| entry.expect("an entry").path())
            .filter(|path| path.extension().is_some_and(|e| e == "md"))
            .map(|path| PathBuf::from("docs").join(path.file_name().expect("a name")))
            .collect();
        pages.sort();
        std::iter::once(Self::read("README.md"))
            .chain(pages.into_iter().map(Self::read))
            .collect()
    }

    /// The lines outside fenced code blocks.
    fn prose(&self) -> impl Iterator<Item = &str> {
        let mut fenced = false;
        self.text.lines().filter(move |line| {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
    }

    /// Its headings' anchors, as GitHub makes them (`## Quick start (Docker)` is
    /// `quick-start-docker`; a repeated one gets `-1`, `-2`, …).
    pub fn anchors(&self) -> BTreeSet<String> {
        let mut anchors = BTreeSet::new();
        for line in self.prose() {
            let Some(heading) = line.strip_prefix('#') else {
                continue;
            };
            let heading = heading.trim_start_matches('#');
            if !heading.starts_with(' ') {
                continue;
            }
            let slug = slug(heading);
            let mut anchor = slug.clone();
            let mut n = 0;
            while anchors.contains(&anchor) {
                n += 1;
                anchor = format!("{slug}-{n}");
            }
            anchors.insert(anchor);
        }
        anchors
    }

    /// Its links that stay in the repository: `](target)` not starting with a scheme.
    pub fn local_links(&self) -> Vec<String> {
        let mut links = Vec::new();
        for line in self.prose() {
            let mut rest = line;
            while let Some(at) = rest.find("](") {
                rest = &rest[at + 2..];
                let Some(end) = rest.find(')') else { break };
                let target = &rest[..end];
                if !target.contains("://") && !target.starts_with("mailto:") {
                    links.push(target.to_owned());
                }
                rest = &rest[end..];
            }
        }
        links
    }

    /// Its inline code spans (`` `…` ``, single backticks) outside fenced blocks, in order.
    pub fn code_spans(&self) -> Vec<String> {
        let mut spans = Vec::new();
        for line in self.prose() {
            let mut parts = line.split('`');
            parts.next();
            while let (Some(span), Some(_)) = (parts.next(), parts.next()) {
                spans.push(span.to_owned());
            }
        }
        spans
    }

    /// Every fenced `sh` block, with the heading it sits right under (`""` before any).
    pub fn shell_blocks(&self) -> Vec<(String, String)> {
        let mut blocks = Vec::new();
        let mut heading = String::new();
        let mut block: Option<String> = None;
        for line in self.text.lines() {
            match &mut block {
                Some(text) if line.trim_start().starts_with("```") => {
                    blocks.push((heading.clone(), std::mem::take(text)));
                    block = None;
                }
                Some(text) => {
                    text.push_str(line.trim_start());
                    text.push('\n');
                }
                None if line.trim_start() == "```sh" => block = Some(String::new()),
                None if is_heading(line) => line.clone_into(&mut heading),
                None => {}
            }
        }
        blocks
    }

    /// The fenced `sh` blocks right under the heading `heading` (up to the next heading),
    /// in order.
    pub fn shell_blocks_under(&self, heading: &str) -> Vec<String> {
        assert!(
            self.text.lines().any(|line| line == heading),
            "{} has the heading {heading:?}",
            self.path.display()
        );
        self.shell_blocks()
            .into_iter()
            .filter(|(under, _)| under == heading)
            .map(|(_, text)| text)
            .collect()
    }
}

fn is_heading(line: &str) -> bool {
    let hashes = line.chars().take_while(|c| *c == '#').count();
    hashes >= 1 && line[hashes..].starts_with(' ')
}

/// GitHub's anchor for a heading's text: lower case, punctuation but `-` and `_` dropped,
/// spaces made `-`.
pub fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Where a shell block runs: a directory of its own, the binaries of this build, free ports.
#[derive(Debug)]
pub struct Sandbox {
    dir: tempfile::TempDir,
    /// The runtime's port (`A2A_PORT`; `localhost:8080` in a `curl` line).
    pub runtime_port: u16,
    /// The proxy's `/healthz` port (`PROXY_PORT`).
    pub proxy_port: u16,
    /// The NATS server's port (`NATS_URL`; `nats-server` is given `-p`).
    pub nats_port: u16,
    /// The real `curl`, behind the shim.
    curl: PathBuf,
}

impl Sandbox {
    /// A sandbox with its shims written.
    pub fn new() -> Self {
        let sandbox = Self {
            dir: tempfile::tempdir().expect("a temporary directory"),
            runtime_port: free_port(),
            proxy_port: free_port(),
            nats_port: free_port(),
            curl: which("curl"),
        };
        sandbox.write_shims();
        sandbox
    }

    /// The directory a block runs in (its `$PWD`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn write_shims(&self) {
        let runtime = crate::runtime_binary();
        let proxy = crate::proxy_binary();
        let nats = crate::nats::binary();
        let store = self.dir().join("jetstream");
        let curl = &self.curl;
        self.shim(
            ".ci/setup",
            "echo 'setup: done (.ci/test ran .ci/setup before the tests)'\n",
        );
        self.shim(
            "shims/cargo",
            &format!(
                "{moved}\n\
                 case $1 in\n\
                 build) echo 'cargo build: built already (the test build)'; exit 0 ;;\n\
                 run) ;;\n\
                 *) echo \"the docs test runs only 'cargo run' and 'cargo build': $*\" >&2; exit 97 ;;\n\
                 esac\n\
                 [ \"$2\" = -p ] || {{ echo \"cargo run without -p: $*\" >&2; exit 97; }}\n\
                 package=$3; shift 3; [ \"${{1:-}}\" = -- ] && shift\n\
                 case $package in\n\
                 daedalus-runtime) exec {runtime} \"$@\" ;;\n\
                 daedalus-proxy) exec {proxy} \"$@\" ;;\n\
                 daedalus-conformance) exec {conformance} \"$@\" ;;\n\
                 *) echo \"no binary for package $package\" >&2; exit 97 ;;\n\
                 esac\n",
                moved = self.moved_arguments(),
                runtime = runtime.display(),
                proxy = proxy.display(),
                conformance = crate::conformance_binary().display(),
            ),
        );
        self.shim(
            ".venv/bin/nats-server",
            &format!(
                "exec {nats} \"$@\" -a 127.0.0.1 -p {port} -sd {store}\n",
                nats = nats.display(),
                port = self.nats_port,
                store = store.display(),
            ),
        );
        self.shim(
            "shims/curl",
            &format!(
                "{moved}\nexec {curl} \"$@\"\n",
                moved = self.moved_arguments(),
                curl = curl.display(),
            ),
        );
        let target = self.dir().join("target/debug");
        std::fs::create_dir_all(&target).expect("creates target/debug");
        std::os::unix::fs::symlink(&runtime, target.join("daedalus-runtime"))
            .expect("links the runtime");
    }

    /// A bash fragment that sets `moved` to the script's arguments with the well-known
    /// ports made the sandbox's. It is evaluated lazily: `"$@"` is the shim's.
    fn moved_arguments(&self) -> String {
        format!(
            "moved=()\nfor a in \"$@\"; do a=\"${{a//localhost:8080/127.0.0.1:{runtime}}}\"; \
             a=\"${{a//127.0.0.1:8080/127.0.0.1:{runtime}}}\"; moved+=(\"$a\"); done\n\
             set -- \"${{moved[@]}}\"",
            runtime = self.runtime_port,
        )
    }

    fn shim(&self, path: &str, body: &str) {
        let path = self.dir().join(path);
        std::fs::create_dir_all(path.parent().expect("a directory")).expect("creates");
        std::fs::write(&path, format!("#!/usr/bin/env bash\n{body}")).expect("writes");
        let mut permissions = std::fs::metadata(&path).expect("written").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
        std::fs::set_permissions(&path, permissions).expect("made executable");
    }

    /// Runs `blocks` as one bash script (`set -euo pipefail`), as a user would paste them,
    /// waiting for each server a line starts in the background; what they started is
    /// stopped (SIGTERM) when the script ends.
    pub fn run(&self, blocks: &[String]) -> Output {
        let curl = &self.curl;
        let settle = format!(
            "__settle() {{\n\
             for _ in $(seq 1 300); do\n\
             case $1 in\n\
             nats) (exec 3<>/dev/tcp/127.0.0.1/{nats}) 2>/dev/null && return 0 ;;\n\
             runtime) {curl} -sf -o /dev/null http://127.0.0.1:{runtime}/health && return 0 ;;\n\
             proxy) {curl} -sf -o /dev/null http://127.0.0.1:{proxy}/healthz && return 0 ;;\n\
             esac\n\
             sleep 0.1\n\
             done\n\
             echo \"docs test: the $1 started in the background did not answer in 30 s\" >&2; return 1\n\
             }}\n",
            nats = self.nats_port,
            runtime = self.runtime_port,
            proxy = self.proxy_port,
            curl = curl.display(),
        );
        let script = format!(
            "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true; wait' EXIT\n{settle}{}",
            with_settles(&blocks.concat())
        );
        let path = format!(
            "{}:{}",
            self.dir().join("shims").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Command::new("bash")
            .arg("-c")
            .arg(script)
            .current_dir(self.dir())
            .env("PATH", path)
            .env("A2A_PORT", self.runtime_port.to_string())
            .env("PROXY_PORT", self.proxy_port.to_string())
            .env("NATS_URL", format!("nats://127.0.0.1:{}", self.nats_port))
            .env("WORK_DIR", self.dir())
            .env("NO_COLOR", "1")
            .env_remove("AGENT_NAME")
            .stdin(Stdio::null())
            .output()
            .expect("bash runs")
    }
}

/// `script` with a `__settle <server>` after each line that starts a server in the
/// background (a line ending in `&`, before any comment).
fn with_settles(script: &str) -> String {
    let mut out = String::new();
    for line in script.lines() {
        out.push_str(line);
        out.push('\n');
        let command = line.split(" #").next().unwrap_or(line).trim_end();
        if !command.ends_with('&') || command.ends_with("&&") {
            continue;
        }
        let server = if command.contains("nats-server") {
            "nats"
        } else if command.contains("-p daedalus-runtime") {
            "runtime"
        } else if command.contains("-p daedalus-proxy") {
            "proxy"
        } else {
            continue;
        };
        out.push_str("__settle ");
        out.push_str(server);
        out.push('\n');
    }
    out
}

impl Default for Sandbox {
    fn default() -> Self {
        Self::new()
    }
}

/// The first `name` on `PATH`.
fn which(name: &str) -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
        .unwrap_or_else(|| panic!("{name} is on PATH"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_are_githubs() {
        let doc = Document {
            path: "x.md".into(),
            text: "# Page\n## Quick start (Docker)\n```sh\n# not a heading\n```\n## Configuration\n### Configuration\n## `agents.yaml`\n"
                .to_owned(),
        };
        let anchors: Vec<String> = doc.anchors().into_iter().collect();
        assert_eq!(
            anchors,
            [
                "agentsyaml",
                "configuration",
                "configuration-1",
                "page",
                "quick-start-docker"
            ]
        );
    }

    #[test]
    fn a_server_started_in_the_background_is_waited_for() {
        let script = "nats-server -js &   # NATS\ncargo run -p daedalus-runtime &\nx && y\ncurl -s localhost:8080/\n";
        assert_eq!(
            with_settles(script),
            "nats-server -js &   # NATS\n__settle nats\ncargo run -p daedalus-runtime &\n__settle runtime\nx && y\ncurl -s localhost:8080/\n"
        );
    }

    #[test]
    fn code_spans_are_read_outside_fences_only() {
        let doc = Document {
            path: PathBuf::from("x.md"),
            text: "Call `GET /health` or `/metrics`; a lone ` is not a span.\n```sh\necho `date`\n```\n`/last`\n".to_owned(),
        };
        assert_eq!(doc.code_spans(), ["GET /health", "/metrics", "/last"]);
    }

    #[test]
    fn shell_blocks_stop_at_the_next_heading() {
        let doc = Document {
            path: "x.md".into(),
            text: "## A\n```sh\none\n```\n### A.1\n```sh\ntwo\n```\n```yaml\nno: 1\n```\n## B\n```sh\nthree\n```\n".to_owned(),
        };
        assert_eq!(doc.shell_blocks_under("## A"), ["one\n"]);
        assert_eq!(doc.shell_blocks_under("### A.1"), ["two\n"]);
        assert_eq!(doc.shell_blocks_under("## B"), ["three\n"]);
    }
}
