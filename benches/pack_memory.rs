//! Memory of the planning pack across tasks: the pack of one large checkout
//! (2,000 files of 150 lines, as the daemon bench's generated repository)
//! made as a task makes it (read on a blocking thread, selected for a
//! request, laid out as the debate's context), then dropped, N times in one
//! process. Printed after each: the bytes still allocated (a counting
//! global allocator: what the program holds, whatever malloc keeps), the
//! resident memory, and the resident memory after `malloc_trim(0)`.
//!
//! Run: `cargo bench --bench pack_memory`; its quick mode (1,000 files,
//! 4 packings), as CI runs it: `cargo test --bench pack_memory -- quick`.
//! The target: what is allocated after the last packing is within 1 MB
//! of what was after the first (a kept pack would add its megabytes each time).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "support/targets.rs"]
mod targets;

use forgehand::planning::pack::PackOptions;
use forgehand::planning::prompts::Context;
use forgehand::planning::select;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: f64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap();
    kib / 1024.0
}

fn mb(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// `files` files of 150 Python-looking lines, 50 to a folder (2,000: 40 folders).
fn checkout(root: &std::path::Path, files: usize) {
    let mut state: u64 = 1;
    let mut next = move |n: u64| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % n
    };
    const SYL: [&str; 16] = [
        "ka", "lo", "mi", "ne", "ra", "tu", "vo", "zi", "sen", "dor", "fal", "gri", "hon", "jas", "mek",
        "nol",
    ];
    for file in 0..files {
        let dir = root.join(format!("src/area{:02}/part{}", file / 250, (file / 50) % 5));
        std::fs::create_dir_all(&dir).unwrap();
        let mut text = String::new();
        for _ in 0..150 {
            let mut word = || -> String { (0..2 + next(2)).map(|_| SYL[next(16) as usize]).collect() };
            let line = format!("{} = {}({}, {})\n", word(), word(), word(), next(10_000));
            text.push_str(&line);
        }
        std::fs::write(dir.join(format!("module_{:02}.py", file % 50)), text).unwrap();
    }
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    checkout(dir.path(), targets::pick(2_000, 1_000));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let prompts = forgehand::prompts::Prompts::embedded();
    println!("task | live after (MB) | RSS after (MB) | RSS after malloc_trim (MB)");
    println!(
        "   0 | {:>15.1} | {:>14.1} |",
        mb(LIVE.load(Ordering::SeqCst)),
        rss_mb()
    );
    let mut after = Vec::new();
    for n in 1..=targets::pick(8, 4) {
        let root = dir.path().to_owned();
        let prompts = prompts.clone();
        runtime.block_on(async move {
            let whole = tokio::spawn(async move {
                tokio::task::spawn_blocking(move || select::read_whole(&root, PackOptions::default()))
                    .await
                    .unwrap()
            })
            .await
            .unwrap()
            .unwrap();
            let selection = tokio::task::spawn_blocking(move || {
                select::choose(whole, "Fix `kamine` in src/area01/part2/module_03.py", 120_000)
            })
            .await
            .unwrap();
            let context = Context::new(prompts, &selection.packed.xml, selection.packed.tokens);
            drop(selection);
            drop(context);
        });
        let live = LIVE.load(Ordering::SeqCst);
        let rss = rss_mb();
        // SAFETY: glibc's malloc_trim takes a pad and touches only the heap.
        unsafe { libc::malloc_trim(0) };
        println!("{n:>4} | {:>15.1} | {rss:>14.1} | {:>10.1}", mb(live), rss_mb());
        after.push(live);
    }
    let growth = mb(after[after.len() - 1]) - mb(after[0]);
    targets::check(
        &format!(
            "bytes in use after packing {}, against after the first",
            after.len()
        ),
        format!("{growth:+.2} MB"),
        "within 1 MB: flat",
        growth.abs() <= 1.0,
    );
    targets::finish();
}
