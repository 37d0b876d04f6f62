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
