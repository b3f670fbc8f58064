//! The targets a bench checks, and its quick mode.
//!
//! A bench run with the argument `quick` (or `FORGEHAND_BENCH_QUICK=1`)
//! takes few rounds and small inputs, as CI runs it from `scripts/test`
//! (`cargo test --bench NAME -- quick`, a debug build). Each [`check`]
//! prints the figure next to its target; [`finish`] exits non-zero when
//! any target was missed, after every figure is printed.
//!
//! Included by path (`#[path = "support/targets.rs"] mod targets;`), so
//! each bench that checks targets compiles its own copy.

#![allow(dead_code)]

use std::sync::Mutex;

static MISSED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Whether the bench runs in its quick mode.
pub fn quick() -> bool {
    std::env::args().any(|a| a == "quick") || std::env::var("FORGEHAND_BENCH_QUICK").is_ok_and(|v| v == "1")
}

/// `full` (rounds, inputs, a bound for the release build), or `quick` in the quick mode.
pub fn pick<T>(full: T, quick: T) -> T {
    if self::quick() {
        quick
    } else {
        full
    }
}

/// Prints `what` measured next to its `target`, and records a miss.
pub fn check(what: &str, measured: impl std::fmt::Display, target: &str, met: bool) {
    let verdict = if met { "met" } else { "MISSED" };
    println!("target  {what:<56} {measured}  (target {target}): {verdict}");
    if !met {
        MISSED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(format!("{what}: {measured}, target {target}"));
    }
}

/// Ends the bench: exits with status 1, naming each miss, when a target was missed.
pub fn finish() {
    let missed = MISSED.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if missed.is_empty() {
        return;
    }
    eprintln!("{} target(s) missed:", missed.len());
    for miss in &missed {
        eprintln!("  MISSED {miss}");
    }
    std::process::exit(1);
}
