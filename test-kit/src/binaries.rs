//! The workspace's binaries for tests of another crate (Cargo sets `CARGO_BIN_EXE_*` only for
//! a crate's own).

use std::path::PathBuf;
use std::process::Command;

/// The `daedalus-runtime` binary of this build (`cargo test --workspace` builds it next to the
/// test binaries); built here when it is missing. `DAEDALUS_RUNTIME_UNDER_TEST` names another
/// build instead (to run the same tests or benchmarks against it).
pub fn runtime_binary() -> PathBuf {
    if let Ok(other) = std::env::var("DAEDALUS_RUNTIME_UNDER_TEST") {
        return PathBuf::from(other);
    }
    workspace_binary("daedalus-runtime", "daedalus-runtime")
}

/// The `daedalus-proxy` binary of this build; built here when it is missing.
pub fn proxy_binary() -> PathBuf {
    workspace_binary("daedalus-proxy", "daedalus-proxy")
}

/// The `daedalus-conformance` binary of this build; built here when it is missing.
pub fn conformance_binary() -> PathBuf {
    workspace_binary("daedalus-conformance", "daedalus-conformance")
}

/// `target/<profile>/<bin>`, built with `cargo build -p <package> --bin <bin>` when missing.
fn workspace_binary(package: &str, bin: &str) -> PathBuf {
    let dir = std::env::current_exe()
        .expect("the test binary's path")
        .parent()
        .and_then(std::path::Path::parent)
        .expect("target/<profile>")
        .to_path_buf();
    let binary = dir.join(bin);
    if !binary.is_file() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let built = Command::new(cargo)
            .args(["build", "-p", package, "--bin", bin])
            .status()
            .expect("cargo runs");
        assert!(built.success(), "{bin} builds");
    }
    binary
}
