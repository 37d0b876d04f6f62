//! The A2A face's wiring: its state built from the configuration at startup, and, on reload, a
//! new deployment of it prepared whole (the card and manifest checked against their schemas)
//! before [`A2aFace::apply`] swaps it in. A new binding of this face touches this folder
//! only.

use std::net::SocketAddr;

use daedalus_contract::SchemaErrors;

use super::{A2aFace, Discovery};
use crate::config::Config;
use crate::services::state::Core;

/// The face for a server bound at `bound`.
pub fn build(config: &Config, core: Core, bound: SocketAddr) -> Result<A2aFace, SchemaErrors> {
    let discovery = Discovery::new(config, bound)?;
    Ok(A2aFace::new(
        core,
        &config.agent.name,
        discovery,
        config.limits,
    ))
}

/// A new deployment of the face, checked, not serving yet.
#[derive(Debug)]
pub struct Prepared {
    agent: String,
    discovery: Discovery,
}

/// The face as `config` would have it: refused whole when its documents do not validate.
pub fn prepare(config: &Config, bound: SocketAddr) -> Result<Prepared, SchemaErrors> {
    Ok(Prepared {
        agent: config.agent.name.clone(),
        discovery: Discovery::new(config, bound)?,
    })
}

impl A2aFace {
    /// From the next request on, serves `next`.
    pub fn apply(&self, next: Prepared) {
        self.redeploy(&next.agent, next.discovery);
    }
}
