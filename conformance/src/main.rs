//! `daedalus-conformance --url URL --level 1`: certify a runtime against the contract.
//! `daedalus-conformance acts --url URL`: run the official A2A corpus (ACTS) against any A2A
//! server.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use daedalus_conformance::{SuiteOptions, acts, run};

/// Black-box conformance suite for the Daedalus runtime contract.
#[derive(Debug, Parser)]
#[command(
    name = "daedalus-conformance",
    version,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Base URL of the runtime under test.
    #[arg(long, env = "CONFORMANCE_URL", default_value = "http://127.0.0.1:8080")]
    url: String,
    /// Conformance level to certify.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=3))]
    level: u8,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Also write a JUnit XML report to this file.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Per-request timeout, e.g. 30s.
    #[arg(long, default_value = "30s", value_parser = daedalus_contract::container::parse_duration)]
    timeout: Duration,
    /// Text sent to provoke a failed task.
    #[arg(long)]
    failure_probe: Option<String>,
    /// Text sent to provoke an input-required task.
    #[arg(long)]
    input_probe: Option<String>,
    /// Level 2: the command that starts the runtime under test. The suite runs it with
    /// `sh -c "exec CMD"` and sets A2A_PORT and TERMINATION_GRACE_PERIOD; it reads its
    /// stdout and sends it SIGTERM. Without it, level 2 cannot be certified.
    #[arg(long, value_name = "CMD")]
    exec: Option<String>,
    /// Level 2: text that makes the runtime work for a while; `{duration}` becomes how long
    /// (`2s`). Default: the passthrough directive `***SLEEP {duration} ...`.
    #[arg(long)]
    slow_probe: Option<String>,
    /// Level 2: the TERMINATION_GRACE_PERIOD the drain check starts the runtime with.
    #[arg(long, default_value = "10s", value_parser = daedalus_contract::container::parse_duration)]
    grace: Duration,
    /// Level 3: the most text one context is sent (bytes, or with a unit: 1MiB) to make a
    /// runtime whose manifest declares contextCompaction compact; one that does not by then
    /// fails L3-COMPACTION-METADATA.
    #[arg(long, default_value = "1MiB", value_parser = parse_bytes)]
    compaction_budget: usize,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Run ACTS, the official A2A conformance corpus (vendored, pinned), against an A2A server.
    Acts(ActsArgs),
}

#[derive(Debug, clap::Args)]
struct ActsArgs {
    /// Base URL of the server under test (its card is at /.well-known/agent-card.json).
    #[arg(long, env = "ACTS_URL", default_value = "http://127.0.0.1:8080")]
    url: String,
    /// The binding to run over (each must be declared by the card), or all.
    #[arg(long, env = "ACTS_BINDING", value_enum, default_value = "all")]
    binding: BindingArg,
    /// The weakest level run: must, should (MUST and SHOULD), or may (every test).
    #[arg(long, env = "ACTS_LEVEL", value_enum, default_value = "may")]
    level: LevelArg,
    /// How the server is configured: full, reduced (no streaming, push or extended card),
    /// or auth (a security scheme enforced; requests carry `Bearer itk-valid-token`).
    #[arg(long, env = "ACTS_PASS", value_enum, default_value = "full")]
    pass: PassArg,
    /// A second user's credential (auth pass), sent as a bearer: the run makes a task as that
    /// user for the test that reads another user's task (skipped without it).
    #[arg(long, env = "ACTS_OTHER_USER_TOKEN")]
    other_user_token: Option<String>,
    /// Where the runner's own webhook receiver listens, for the push-delivery tests (the
    /// server under test posts its push notifications there).
    #[arg(long, env = "ACTS_WEBHOOK_LISTEN", default_value = "127.0.0.1:0")]
    webhook_listen: std::net::SocketAddr,
    /// The base URL the server under test reaches that receiver at, when not the address
    /// bound (a server in a container: `http://host.docker.internal:9099` with
    /// `--webhook-listen 0.0.0.0:9099`).
    #[arg(long, env = "ACTS_WEBHOOK_URL")]
    webhook_url: Option<String>,
    /// The server plays none of the corpus's behaviours (`tck-*` messages): run only the
    /// tests that need none (discovery, errors, wire format, version negotiation).
    #[arg(long, env = "ACTS_NO_BEHAVIOURS")]
    no_behaviours: bool,
    /// Only the tests whose id starts with this (repeatable).
    #[arg(long, env = "ACTS_ONLY", value_delimiter = ',')]
    only: Vec<String>,
    /// Each request's time, e.g. 30s.
    #[arg(long, env = "ACTS_TIMEOUT", default_value = "30s", value_parser = daedalus_contract::container::parse_duration)]
    timeout: Duration,
    /// Also write a JUnit XML report to this file.
    #[arg(long, env = "ACTS_JUNIT", value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Print the report as JSON instead of text.
    #[arg(long, env = "ACTS_JSON")]
    json: bool,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum BindingArg {
    Jsonrpc,
    Rest,
    Grpc,
    All,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum LevelArg {
    Must,
    Should,
    May,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum PassArg {
    Full,
    Reduced,
    Auth,
}

/// The ACTS run `args` ask for.
fn acts_options(args: &ActsArgs) -> acts::run::ActsOptions {
    use acts::corpus::{Binding, Level};
    use acts::run::Pass;
    let mut options = acts::run::ActsOptions::new(&args.url);
    options.bindings = match args.binding {
        BindingArg::Jsonrpc => vec![Binding::Jsonrpc],
        BindingArg::Rest => vec![Binding::Rest],
        BindingArg::Grpc => vec![Binding::Grpc],
        BindingArg::All => Binding::ALL.to_vec(),
    };
    options.level = match args.level {
        LevelArg::Must => Level::Must,
        LevelArg::Should => Level::Should,
        LevelArg::May => Level::May,
    };
    options.pass = match args.pass {
        PassArg::Full => Pass::Full,
        PassArg::Reduced => Pass::Reduced,
        PassArg::Auth => Pass::Auth,
    };
    options.only.clone_from(&args.only);
    options.other_user_token.clone_from(&args.other_user_token);
    options.timeout = args.timeout;
    options.no_behaviours = args.no_behaviours;
    options.webhook_listen = args.webhook_listen;
    options.webhook_url.clone_from(&args.webhook_url);
    options
}

/// `daedalus-conformance acts`: exit 0 when conformant, 1 when not, 2 when it cannot run.
async fn run_acts(args: &ActsArgs) -> ExitCode {
    let options = acts_options(args);
    let corpus = match acts::corpus::Corpus::vendored() {
        Ok(corpus) => corpus,
        Err(e) => {
            eprintln!("daedalus-conformance: {e}");
            return ExitCode::from(2);
        }
    };
    let results = match acts::run::run(&corpus, &options).await {
        Ok(results) => results,
        Err(e) => {
            eprintln!("daedalus-conformance: {e}");
            return ExitCode::from(2);
        }
    };
    #[expect(clippy::print_stdout, reason = "the report is the program's output")]
    if args.json {
        println!("{:#}", acts::report::to_json(&options, &results));
    } else {
        print!("{}", acts::report::to_text(&options, &results));
    }
    if let Some(path) = &args.junit
        && let Err(e) = std::fs::write(path, acts::report::to_junit(&options, &results))
    {
        eprintln!("daedalus-conformance: cannot write {}: {e}", path.display());
        return ExitCode::from(2);
    }
    if acts::run::certifies(&results) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `1048576`, `1MiB`, `512KiB`.
fn parse_bytes(value: &str) -> Result<usize, String> {
    let value = value.trim();
    let (number, unit) = value
        .find(|c: char| !c.is_ascii_digit())
        .map_or((value, ""), |i| value.split_at(i));
    let number: usize = number
        .parse()
        .map_err(|_| format!("{value:?} is not a size"))?;
    let unit = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        other => return Err(format!("{other:?} is not a unit (B, KiB, MiB)")),
    };
    number
        .checked_mul(unit)
        .ok_or_else(|| format!("{value:?} is too large"))
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(Command::Acts(args)) = &cli.command {
        return run_acts(args).await;
    }
    let mut options = SuiteOptions::new(&cli.url);
    options.level = cli.level;
    options.timeout = cli.timeout;
    if let Some(p) = cli.failure_probe {
        options.failure_probe = p;
    }
    if let Some(p) = cli.input_probe {
        options.input_probe = p;
    }
    if let Some(p) = cli.slow_probe {
        options.slow_probe = p;
    }
    options.exec = cli.exec;
    options.grace = cli.grace;
    options.compaction_budget = cli.compaction_budget;
    let report = match run(&options).await {
        Ok(report) => report,
        Err(e) => {
            eprintln!("daedalus-conformance: {e}");
            return ExitCode::from(2);
        }
    };
    #[expect(clippy::print_stdout, reason = "the report is the program's output")]
    if cli.json {
        println!("{:#}", report.to_json());
    } else {
        print!("{}", report.to_text());
    }
    if let Some(path) = cli.junit
        && let Err(e) = std::fs::write(&path, report.to_junit())
    {
        eprintln!("daedalus-conformance: cannot write {}: {e}", path.display());
        return ExitCode::from(2);
    }
    if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
