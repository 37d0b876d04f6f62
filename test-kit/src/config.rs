//! The runtime's configuration, as its pure parser builds it from arguments.

use std::ffi::OsString;
use std::net::SocketAddr;

use daedalus_runtime::config::{Config, Launch, SessionsDb, TasksDb};

/// The runtime's configuration for one passthrough agent named `agent`, listening on `listen`,
/// with the contract's defaults, and sessions and tasks in memory (a test's runtime keeps no
/// file in the directory it runs in).
pub fn runtime_config(agent: &str, listen: SocketAddr) -> Config {
    let args = ["daedalus-runtime", "--agent-name", agent].map(OsString::from);
    let nowhere = std::env::temp_dir().join("daedalus-test-kit-no-config");
    match Launch::from_sources(args, &|_| None, &nowhere) {
        Ok(Launch::Run(mut config)) => {
            config.listen = listen;
            config.sessions_db = Some(SessionsDb::Sqlite(":memory:".to_owned()));
            config.tasks_db = TasksDb::Memory;
            config
        }
        other => panic!("the default configuration is valid: {other:?}"),
    }
}

/// The test key cards are signed with in tests (ES256, PKCS#8 PEM; the contract crate's
/// `tests/card_keys/es256.pem`). Never a key for anything else.
pub fn card_signing_key_file() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../schemas/tests/card_keys/es256.pem")
}

/// A signing plan with [`card_signing_key_file`]'s key, named `test-key`.
pub fn card_signing_plan() -> daedalus_runtime::config::SigningPlan {
    let pem = std::fs::read(card_signing_key_file()).expect("the test key");
    let key = daedalus_contract::card_signing::SigningKey::read(&pem, Some("test-key"), None)
        .expect("the test key reads");
    daedalus_runtime::config::SigningPlan {
        key: std::sync::Arc::new(key),
        overlap: std::time::Duration::from_hours(1),
    }
}
