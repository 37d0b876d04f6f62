//! Giving freed memory back to the operating system. glibc keeps what a burst of small
//! allocations freed (a flood of MCP sessions that expired) in its arenas; `malloc_trim` hands
//! the free pages back, so the process's RSS comes back down.

/// Asks the allocator to return free memory to the operating system (glibc on Linux; a no-op
/// elsewhere).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn give_back_free_memory() {
    #[expect(
        unsafe_code,
        reason = "malloc_trim is glibc's documented call to release free memory; it takes no pointer"
    )]
    // SAFETY: malloc_trim only walks the allocator's own free lists, under its own locks.
    let released = unsafe { libc::malloc_trim(0) };
    tracing::debug!(released = released != 0, "free memory given back");
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn give_back_free_memory() {}
