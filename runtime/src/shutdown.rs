//! Shutdown signals: the first SIGTERM or SIGINT starts a graceful shutdown; a second one
//! exits the process at once.

/// Exit status of an immediate exit on a second signal (128 + SIGINT, by convention).
pub const FORCED_EXIT_CODE: i32 = 130;

/// Resolves on the first SIGTERM or SIGINT, and arms the second-signal exit.
pub async fn signal() {
    wait_for_signal().await;
    tracing::info!("shutdown signal received; send another to exit immediately");
    tokio::spawn(async {
        wait_for_signal().await;
        tracing::warn!("second shutdown signal: exiting now");
        std::process::exit(FORCED_EXIT_CODE);
    });
}

#[cfg(unix)]
async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler installs");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler installs");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

#[cfg(not(unix))]
async fn wait_for_signal() {
    let _ = tokio::signal::ctrl_c().await;
}
