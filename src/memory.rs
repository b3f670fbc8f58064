//! glibc's malloc, set up for a daemon that runs for months.
//!
//! By default glibc raises its mmap threshold to the size of every large
//! block freed (up to 32 MiB), and its trim threshold to twice that. After
//! the first task frees its planning pack (a 10 MB XML text, vectors of
//! thousands of files), later packs are carved out of the per-thread arenas
//! instead of being mapped, and each arena then keeps up to twice the
//! largest block it saw, free but never returned. Tasks run on whichever
//! threads are free, so they spread over more and more arenas: the daemon
//! grew by about 40 MB a task on a 2,000-file checkout while the memory in
//! use stayed flat (`malloc_stats` after three tasks: 94 MB held by malloc,
//! 15 MB of it in use).
//!
//! Fixing both thresholds at glibc's defaults (128 KiB) turns that
//! adjustment off: large blocks are mapped and unmapped, and an arena gives
//! back the free memory at its top.

/// glibc's default mmap threshold and trim threshold: 128 KiB.
pub const THRESHOLD: usize = 128 * 1024;

/// Fixes malloc's mmap and trim thresholds at [`THRESHOLD`], so freed
/// large blocks go back to the system. Call it first in `main`. Leaves
/// malloc as it is where glibc is not the allocator, and where the
/// thresholds are set in the environment (`GLIBC_TUNABLES`,
/// `MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_`). `true`: set here.
pub fn return_freed_memory() -> bool {
    let tuned = std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("glibc.malloc."))
        || std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_some()
        || std::env::var_os("MALLOC_TRIM_THRESHOLD_").is_some();
    !tuned && fix_thresholds()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn fix_thresholds() -> bool {
    let value = THRESHOLD as libc::c_int;
    // SAFETY: mallopt only sets malloc's parameters, under its own lock.
    let mmap = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, value) };
    // SAFETY: as above.
    let trim = unsafe { libc::mallopt(libc::M_TRIM_THRESHOLD, value) };
    mmap == 1 && trim == 1
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn fix_thresholds() -> bool {
    false
}

/// Returns to the system the free memory inside malloc's arenas, not only
/// at their tops: what a task freed between blocks still in use (the
/// planners' files read from git objects leave their buffers spread over
/// the arenas of the blocking threads that read them). Call it when a task
/// has ended; it takes a few milliseconds. `Some(true)`: pages were given
/// back; `None` where glibc is not the allocator.
pub fn give_back() -> Option<bool> {
    trim()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() -> Option<bool> {
    // SAFETY: malloc_trim only releases free pages, under malloc's locks.
    Some(unsafe { libc::malloc_trim(0) } == 1)
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() -> Option<bool> {
    None
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    /// Bytes in blocks malloc has mapped on their own.
    fn mapped() -> usize {
        // SAFETY: mallinfo2 only reads malloc's statistics.
        unsafe { libc::mallinfo2() }.hblkhd
    }

    #[test]
    fn large_blocks_stay_mapped_after_a_larger_one_is_freed() {
        assert!(fix_thresholds());
        // Without the fixed thresholds, freeing this raises the mmap
        // threshold to 24 MiB: the next 16 MiB would come from an arena,
        // and stay there once freed.
        drop(std::hint::black_box(vec![1u8; 24 << 20]));
        // Other tests allocate and free meanwhile: one of a few tries
        // sees the block alone.
        let seen = (0..5).any(|_| {
            let before = mapped();
            let block = std::hint::black_box(vec![1u8; 16 << 20]);
            let after = mapped();
            drop(block);
            after >= before + (16 << 20)
        });
        assert!(
            seen,
            "a 16 MiB block is mapped on its own, so freeing it returns it"
        );
    }
}
