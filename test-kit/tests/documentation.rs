//! The README and `docs/` hold together: every link between them lands on a file and a heading
//! that exist, every page is on the README's map and starts with what a user does, and every
//! shell block is run as written, here ([`RUN_HERE`], in a [`Sandbox`]) or by the CI step
//! named for it ([`RUN_ELSEWHERE`]).

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use daedalus_test_kit::docs::{Document, Sandbox, workspace};

/// The headings whose shell blocks the tests below run, by page.
const RUN_HERE: &[(&str, &str)] = &[
    ("README.md", "## Quick start: `cargo run`"),
    ("docs/running.md", "# Running the runtime"),
    ("docs/proxy.md", "# The proxy sidecar"),
    ("docs/conformance.md", "# The conformance suite"),
    ("docs/conformance.md", "## Level 2"),
];

/// Blocks no test here runs, by page and first line, with what runs them, or why nothing can.
const RUN_ELSEWHERE: &[(&str, &str, &str)] = &[
    (
        "README.md",
        "bash .ci/stack",
        "a developer's command; .ci/stack is itself the run, and its steps are the quick start's",
    ),
    (
        "README.md",
        "docker compose up -d --build",
        ".ci/compose-test: the same stack built, published through, crashed and stopped",
    ),
    ("docs/agents.md", "bash .ci/tck", ".ci/test runs it"),
    (
        "docs/card-signing.md",
        "# Make a key",
        "needs openssl, which nothing here pins; keys it makes (PKCS#8 P-256, Ed25519, RSA) are read by schemas/src/card_signing/tests.rs, and runtime/tests/card_signing.rs starts runtimes with them and verifies their cards and JWKS with the official SDK",
    ),
    (
        "docs/deployment.md",
        "docker compose up -d --build",
        ".ci/compose-test",
    ),
    (
        "docs/deployment.md",
        "docker compose --profile llm up -d llm",
        "pulls a model from the internet; .ci/compose-test runs the stack without it",
    ),
    (
        "docs/conformance.md",
        "DEFAULT_MODEL=tck cargo run -p daedalus-runtime &",
        "conformance/tests/acts.rs runs ACTS against the runtime's tck model over every binding",
    ),
    (
        "docs/deployment.md",
        "docker compose --profile monitoring up -d",
        ".ci/compose-test (its monitoring step: both targets up, every rule loaded)",
    ),
    (
        "docs/deployment.md",
        "OTEL_EXPORTER_OTLP_ENDPOINT=http://otel-collector:4318",
        "the otel profile pulls collector images; both binaries' export is tested against an OTLP receiver",
    ),
    (
        "docs/deployment.md",
        "# The images, where the cluster pulls from",
        "needs a cluster and a registry: .ci/kubernetes renders and validates every overlay, test-kit/tests/kubernetes.rs runs each container's --check-config on its rendered environment",
    ),
    (
        "docs/deployment.md",
        "for pod in $(kubectl",
        "needs a cluster",
    ),
    ("docs/development.md", "bash .ci/test", "it is CI (.ci/run)"),
    (
        "docs/development.md",
        "bash .ci/setup",
        ".ci/test runs it first",
    ),
    (
        "docs/performance.md",
        "CPU_BENCH_ONLY=callgrind",
        "a benchmark, run by hand (valgrind); its figures are on the page",
    ),
    (
        "docs/proxy.md",
        "nats pub agent.tasks.demo",
        "needs the `nats` CLI, which nothing here pins; proxy/tests make the same exchange through async-nats",
    ),
];

/// Every `sh` block of the documentation: (page, the heading it sits under, its text).
fn shell_blocks() -> Vec<(String, String, String)> {
    Document::all()
        .into_iter()
        .flat_map(|doc| {
            let page = doc.path.display().to_string();
            doc.shell_blocks()
                .into_iter()
                .map(move |(heading, text)| (page.clone(), heading, text))
        })
        .collect()
}

#[test]
fn every_shell_block_is_run_here_or_names_what_runs_it() {
    let blocks = shell_blocks();
    assert!(
        blocks.len() >= 15,
        "the pages' shell blocks are found ({})",
        blocks.len()
    );
    let mut unaccounted = Vec::new();
    for (page, heading, text) in &blocks {
        let here = RUN_HERE.iter().any(|(p, h)| p == page && h == heading);
        let elsewhere = RUN_ELSEWHERE
            .iter()
            .any(|(p, first, _)| p == page && text.starts_with(first));
        if !here && !elsewhere {
            unaccounted.push(format!("{page} under {heading:?}:\n{text}"));
        }
    }
    assert!(
        unaccounted.is_empty(),
        "shell blocks no test runs and nothing accounts for:\n{}",
        unaccounted.join("\n")
    );
    for (page, first, why) in RUN_ELSEWHERE {
        assert!(
            blocks
                .iter()
                .any(|(p, _, text)| p == page && text.starts_with(first)),
            "{page} has no block starting {first:?} any more ({why}): drop the entry"
        );
    }
}

/// Runs the blocks under `heading` of `page`, and answers its stdout; a failure is printed whole.
fn run_blocks_of(page: &str, heading: &str) -> String {
    assert!(
        RUN_HERE.contains(&(page, heading)),
        "{page} {heading:?} is listed in RUN_HERE"
    );
    let blocks = Document::read(page).shell_blocks_under(heading);
    assert!(
        !blocks.is_empty(),
        "{page} has shell blocks under {heading:?}"
    );
    let ran = Sandbox::new().run(&blocks);
    let stdout = String::from_utf8_lossy(&ran.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(
        ran.status.success(),
        "{page} {heading:?} fails ({}):\n{}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        ran.status,
        blocks.concat()
    );
    stdout
}

/// `link` from `from` (a document's path), as a path from the workspace's root and an anchor.
fn resolve(from: &Path, link: &str) -> (PathBuf, Option<String>) {
    let (file, anchor) = match link.split_once('#') {
        Some((file, anchor)) => (file, Some(anchor.to_owned())),
        None => (link, None),
    };
    if file.is_empty() {
        return (from.to_path_buf(), anchor);
    }
    let mut path = PathBuf::new();
    for part in from
        .parent()
        .unwrap_or(Path::new(""))
        .join(file)
        .components()
    {
        match part {
            Component::ParentDir => {
                path.pop();
            }
            Component::CurDir => {}
            other => path.push(other),
        }
    }
    (path, anchor)
}

#[test]
fn every_link_lands_on_a_file_and_a_heading_that_exist() {
    let documents = Document::all();
    let anchors: BTreeMap<PathBuf, _> = documents
        .iter()
        .map(|doc| (doc.path.clone(), doc.anchors()))
        .collect();
    let mut broken = Vec::new();
    let mut checked = 0;
    for doc in &documents {
        for link in doc.local_links() {
            checked += 1;
            let (target, anchor) = resolve(&doc.path, &link);
            if !workspace().join(&target).exists() {
                broken.push(format!(
                    "{}: {link}: no file {}",
                    doc.path.display(),
                    target.display()
                ));
                continue;
            }
            if let Some(anchor) = anchor {
                match anchors.get(&target) {
                    Some(known) if known.contains(&anchor) => {}
                    Some(_) => broken.push(format!(
                        "{}: {link}: {} has no heading #{anchor}",
                        doc.path.display(),
                        target.display()
                    )),
                    None => broken.push(format!(
                        "{}: {link}: an anchor into a file that is not a document",
                        doc.path.display()
                    )),
                }
            }
        }
    }
    assert!(
        checked > 30,
        "the documents link to each other ({checked} links)"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_maps_every_page_and_stays_short() {
    let readme = Document::read("README.md");
    let lines = readme.text.lines().count();
    assert!(
        lines <= 250,
        "the README is {lines} lines; its subjects belong in docs/"
    );
    let linked: Vec<PathBuf> = readme
        .local_links()
        .iter()
        .map(|link| resolve(&readme.path, link).0)
        .collect();
    let unmapped: Vec<String> = Document::all()
        .into_iter()
        .skip(1)
        .filter(|page| !linked.contains(&page.path))
        .map(|page| page.path.display().to_string())
        .collect();
    assert!(
        unmapped.is_empty(),
        "pages the README does not link: {unmapped:?}"
    );
}

#[test]
fn every_page_starts_with_a_title_and_what_a_user_does() {
    for page in Document::all().into_iter().skip(1) {
        let mut lines = page.text.lines();
        let title = lines.next().unwrap_or_default();
        assert!(
            title.starts_with("# "),
            "{} starts with its title",
            page.path.display()
        );
        assert_eq!(lines.next(), Some(""), "{}", page.path.display());
        let lead = lines.next().unwrap_or_default();
        assert!(
            !lead.is_empty() && !lead.starts_with('#') && !lead.starts_with('|'),
            "{} says what a user does before anything else, not {lead:?}",
            page.path.display()
        );
    }
}

#[test]
fn the_readme_quick_start_runs_a_task_through_nats_and_answers_a2a() {
    let blocks = Document::read("README.md").shell_blocks_under("## Quick start: `cargo run`");
    assert_eq!(
        blocks.len(),
        2,
        "the quick start: the stack, then A2A by hand"
    );
    let stdout = run_blocks_of("README.md", "## Quick start: `cargo run`");
    // `publish "Hello"` prints the result: the passthrough agent's echo.
    assert!(
        stdout.contains("completed") && stdout.contains("\nHello\n"),
        "publish prints the echoed result:\n{stdout}"
    );
    // The card, then a JSON-RPC SendMessage answered with the completed task.
    assert!(
        stdout.contains("\"supportedInterfaces\""),
        "the card:\n{stdout}"
    );
    assert!(
        stdout.contains("TASK_STATE_COMPLETED") && stdout.contains("\"hello\""),
        "SendMessage answers the completed echo:\n{stdout}"
    );
}

#[test]
fn running_the_runtime_prints_its_configuration_and_answers_a_task() {
    let stdout = run_blocks_of("docs/running.md", "# Running the runtime");
    assert!(
        stdout.contains("[env: A2A_PORT="),
        "--help names each flag's variable:\n{stdout}"
    );
    assert!(
        stdout.contains("\"tasks_db\""),
        "--check-config prints what it resolved:\n{stdout}"
    );
    assert!(
        stdout.contains("\"id\":\"task-001\"") && stdout.contains("\"state\":\"completed\""),
        "POST / answers the completed task:\n{stdout}"
    );
}

#[test]
fn the_proxy_page_publishes_three_ways() {
    let stdout = run_blocks_of("docs/proxy.md", "# The proxy sidecar");
    assert!(
        stdout.contains("Summarize the release notes"),
        "publish prints the result:\n{stdout}"
    );
    assert!(
        stdout.contains("long text"),
        "a message from stdin, answered as JSON:\n{stdout}"
    );
    assert!(
        stdout.contains("Explain JetStream"),
        "--follow prints the streamed answer:\n{stdout}"
    );
}

#[test]
fn the_conformance_pages_commands_certify_the_runtime() {
    let stdout = run_blocks_of("docs/conformance.md", "# The conformance suite");
    assert!(
        stdout.contains("L1-"),
        "level 1's checks are reported:\n{stdout}"
    );
    let level2 = run_blocks_of("docs/conformance.md", "## Level 2");
    assert!(
        level2.contains("L2-"),
        "level 2's checks are reported:\n{level2}"
    );
}

/// Code spans that start with `/` but name no HTTP route of ours, and why.
const NOT_ROUTES: &[(&str, &str)] = &[
    ("/workspace", "WORK_DIR's default: a directory"),
    ("/proc", "Linux's process files"),
    ("/proc/<pid>/stat", "Linux's process files"),
    ("/proc/<pid>/io", "Linux's process files"),
    ("/proc/<pid>/task/*/status", "Linux's process files"),
    (
        "/v1/models/{model}",
        "the LLM provider's route, which the runtime calls",
    ),
    (
        "/v1/message:send",
        "v0.3's REST form, which the page says is not served",
    ),
    (
        "/lf.a2a.v1.A2AService/{method}",
        "a gRPC method: runtime/tests/a2a_grpc.rs calls each",
    ),
    (
        "/a2a.v1.A2AService/...",
        "a gRPC method: runtime/tests/a2a_grpc.rs calls each",
    ),
];

/// The methods and path a code span names when it names an HTTP route (`GET /health`,
/// `/agents/<name>/mcp`, `http://localhost:8080/agents/demo/mcp`; GET, then POST, when it names
/// no method); `None` for any other span.
fn route_of(span: &str) -> Option<(Vec<String>, String)> {
    let (methods, path) = match span.split_once(' ') {
        Some((method, path)) if ["GET", "POST", "PUT", "DELETE", "PATCH"].contains(&method) => {
            (vec![method], path)
        }
        _ => (vec!["GET", "POST"], span),
    };
    let path = ["http://localhost:8080", "http://127.0.0.1:8080"]
        .iter()
        .find_map(|base| path.strip_prefix(base))
        .unwrap_or(path);
    let named = path.starts_with('/') && !path.starts_with("//") && !path.contains(' ');
    named.then(|| {
        (
            methods.into_iter().map(str::to_owned).collect(),
            path.to_owned(),
        )
    })
}

/// `path` with its placeholders filled for the test's deployment: its agent, a task it
/// answered, a tenant; an optional part (`[/{configId}]`) and the query dropped; a trailing
/// `...` (the routes under a prefix) is the prefix's task list.
fn filled(path: &str, agent: &str, task_id: &str) -> String {
    let mut path = path.split(['?', '#']).next().unwrap_or_default().to_owned();
    while let (Some(open), Some(close)) = (path.find('['), path.find(']')) {
        if close < open {
            break;
        }
        path.replace_range(open..=close, "");
    }
    [
        ("<name>", agent),
        ("<agent>", agent),
        ("{id}", task_id),
        ("{tenant}", "acme"),
        ("...", "tasks"),
        ("…", "tasks"),
    ]
    .iter()
    .fold(path, |path, (placeholder, value)| {
        path.replace(placeholder, value)
    })
}

/// The first of `bases` that answers `path` by one of `methods` with anything but 404, and
/// its status.
async fn answered(
    http: &reqwest::Client,
    bases: &[String],
    methods: &[String],
    path: &str,
) -> Option<(String, u16)> {
    for (base, method) in bases
        .iter()
        .flat_map(|b| methods.iter().map(move |m| (b, m)))
    {
        let request = http
            .request(method.parse().expect("a method"), format!("{base}{path}"))
            .header("content-type", "application/json")
            .header("a2a-version", "1.0");
        let request = if method == "GET" {
            request
        } else {
            request.body("{}")
        };
        let Ok(response) = request.send().await else {
            continue;
        };
        let status = response.status().as_u16();
        if status != 404 {
            return Some((base.clone(), status));
        }
    }
    None
}

/// The proxy binary beside `runtime` on `nats`, serving `/healthz` and `/metrics` on `port`;
/// killed when dropped.
struct ProxyProcess(std::process::Child);

impl ProxyProcess {
    fn start(nats: &str, runtime: &str, port: u16) -> Self {
        let child = std::process::Command::new(daedalus_test_kit::proxy_binary())
            .env("AGENT_NAME", "demo")
            .env("NATS_URL", nats)
            .env("RUNTIME_URL", runtime)
            .env("PROXY_HOST", "127.0.0.1")
            .env("PROXY_PORT", port.to_string())
            .env("LOG_LEVEL", "warn")
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("the proxy starts");
        Self(child)
    }
}

impl Drop for ProxyProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Every HTTP path a page names in a code span (`GET /health`, `/agents/<name>/mcp`,
/// `/.well-known/…`) is answered, not 404, by the runtime (its main port or an agent's own), or
/// by the proxy beside it; a path relative to the HTTP+JSON binding (`/tasks/{id}:cancel`) by
/// the runtime under `/a2a/rest`.
#[tokio::test(flavor = "multi_thread")]
async fn every_path_the_pages_name_is_served() {
    let agent_port = daedalus_test_kit::free_port();
    let runtime = daedalus_test_kit::Runtime::start(&format!(
        "agents:\n  demo:\n    model: passthrough\n    port: {agent_port}\n"
    ))
    .await;
    let main = format!("http://127.0.0.1:{}", runtime.port());
    let http = reqwest::Client::new();
    let task_id = "doc-task";
    let answer = http
        .post(format!("{main}/"))
        .json(&serde_json::json!({"message": {"messageId": task_id, "role": "user", "parts": [{"text": "hi"}]}}))
        .send()
        .await
        .expect("the runtime answers");
    assert_eq!(answer.status(), 200, "a task for the paths that name one");
    let nats = daedalus_test_kit::NatsServer::start();
    let proxy_port = daedalus_test_kit::free_port();
    let _proxy = ProxyProcess::start(&nats.url(), &main, proxy_port);
    let proxy = format!("http://127.0.0.1:{proxy_port}");
    daedalus_test_kit::wait_until(
        "the proxy serves /healthz",
        std::time::Duration::from_secs(30),
        || async { http.get(format!("{proxy}/healthz")).send().await.is_ok() },
    )
    .await;
    let bases = [
        main.clone(),
        format!("{main}/a2a/rest"),
        format!("http://127.0.0.1:{agent_port}"),
        proxy,
    ];

    // The check can tell: the path docs/mcp-face.md once gave for an agent's MCP server is
    // answered by nothing here.
    assert_eq!(
        answered(
            &http,
            &bases,
            &["GET".to_owned(), "POST".to_owned()],
            "/mcp/demo"
        )
        .await,
        None,
        "a path no route serves is found out"
    );

    let mut unserved = Vec::new();
    let mut checked = 0;
    for doc in Document::all() {
        for span in doc.code_spans() {
            let Some((methods, path)) = route_of(&span) else {
                continue;
            };
            if NOT_ROUTES.iter().any(|(not, _)| *not == path) {
                continue;
            }
            checked += 1;
            let url_path = filled(&path, "demo", task_id);
            if answered(&http, &bases, &methods, &url_path).await.is_none() {
                unserved.push(format!(
                    "{}: `{span}` ({} {url_path})",
                    doc.path.display(),
                    methods.join("|")
                ));
            }
        }
    }
    assert!(checked > 100, "the pages name paths ({checked} checked)");
    assert!(
        unserved.is_empty(),
        "paths the pages name that nothing serves:\n{}",
        unserved.join("\n")
    );
    for (path, why) in NOT_ROUTES {
        assert!(
            Document::all().iter().any(|doc| doc
                .code_spans()
                .iter()
                .any(|s| route_of(s).is_some_and(|(_, p)| p == *path))),
            "no page names {path:?} any more ({why}): drop the entry"
        );
    }
}
