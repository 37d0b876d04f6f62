//! The process's life: start, serve, reload, drain. [`run()`] is the whole of it: the named
//! steps of [`startup`] in order, then [`reload`]'s swaps on each SIGHUP until the shutdown
//! future resolves, then the drain. [`serve`] is the accept loop every port runs.
//!
//! Everything here sits above the rest of the crate: it builds the core, the faces and the
//! fleet, and nothing below imports it.
//!
//! May import: `faces`, `services`, `agents`, `config`, `stores`, `platform`.

pub mod reload;
pub mod run;
pub mod serve;
pub mod startup;

pub use run::{run, run_core, run_reloading};
pub use startup::{PREFLIGHT_TTL, RunError};
