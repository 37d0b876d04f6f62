//! Keys a caller sent that nothing reads: one warning per (where, key), never silence, never a
//! log line per call.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock, PoisonError};

/// Warns once about each key of `keys` that `known` does not hold, sent to `place` (the MCP
/// tool of an agent, or an A2A binding's metadata).
pub fn warn_unknown_keys<'k>(
    place: &str,
    keys: impl IntoIterator<Item = &'k String>,
    known: impl Fn(&str) -> bool,
) {
    static WARNED: OnceLock<Mutex<HashSet<(String, String)>>> = OnceLock::new();
    // Bounded: a caller choosing new key names cannot grow it past this.
    const MAX_REMEMBERED: usize = 1_000;
    let warned = WARNED.get_or_init(Mutex::default);
    for key in keys.into_iter().filter(|k| !known(k)) {
        let mut seen = warned.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.len() >= MAX_REMEMBERED {
            return;
        }
        if seen.insert((place.to_owned(), key.clone())) {
            drop(seen);
            let shown: String = key.chars().take(64).collect();
            tracing::warn!(place, key = %shown, "a key nothing reads was sent; it is ignored");
        }
    }
}
