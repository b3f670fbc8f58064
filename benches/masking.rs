//! Masking credentials by format over a failed job's log: 5 MB of build
//! and test output (GitHub's per-line timestamps, compiler errors, test
//! results, commit hashes, UUIDs, base64), clean and with a credential
//! every 2,000 lines; and over a progress comment, the small text every
//! comment edit passes through.
//!
//! Run: `cargo bench --bench masking`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "support/targets.rs"]
mod targets;

use forgehand::config::Secrets;
use forgehand_test_support::stats;
use std::time::{Duration, Instant};

const LOG_BYTES: usize = 5 << 20;

/// One line of ordinary CI output, varied by `n`.
fn ordinary(n: usize) -> String {
    let stamp = format!("2026-11-26T10:{:02}:{:02}.{:07}Z", n / 60 % 60, n % 60, n);
    let body = match n % 8 {
        0 => format!("   Compiling secret-service v3.{n}.1 (/home/runner/work/app/app/crates/s{n})"),
        1 => format!("test auth::token_expires_after_{n}_minutes ... ok"),
        2 => format!("error[E0308]: mismatched types in src/lib{n}.rs: expected `Token`, found `&str`"),
        3 => format!("HEAD is now at {n:07x}3f786850e387550fdab836ed7e6dc881de2 Merge pull request #{n}"),
        4 => format!("request 123e4567-e89b-12d3-a456-{n:012} done in {} ms", n % 977),
        5 => "  const LOGO: &str = \"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk\";".into(),
        6 => format!(
            "password: must be at least {} characters (max_tokens: {n})",
            n % 16
        ),
        _ => format!("npm WARN deprecated package-{n}@1.0.{}: use the new API", n % 10),
    };
    format!("{stamp} {body}\n")
}

/// A line that prints a credential, varied by `n`.
fn leaking(n: usize) -> String {
    let tail = format!("{n:0>16}");
    match n % 3 {
        0 => format!(
            "+ echo REGISTRY_TOKEN=ghp_Zq7Xk2Lm9Pw4Rt8Vn3Bc6Hy1Jd5F{}\n",
            &tail[..8]
        ),
        1 => format!(
            "+ git push https://oauth2:glpat-J0bTraceLeaksT{}@example.org/x.git\n",
            &tail[..9]
        ),
        _ => "AWS_ACCESS_KEY_ID=AKIAZ2XQ3W4E5R6T7Y2U\n".to_owned(),
    }
}

fn log(with_secrets: bool) -> String {
    let mut log = String::with_capacity(LOG_BYTES + 200);
    let mut n = 0;
    while log.len() < LOG_BYTES {
        if with_secrets && n % 2_000 == 1_000 {
            log.push_str(&leaking(n));
        } else {
            log.push_str(&ordinary(n));
        }
        n += 1;
    }
    log
}

fn measure(name: &str, secrets: &Secrets, text: &str) {
    let runs = targets::pick(5, 3);
    let mut times = Vec::new();
    let mut masked_rules = 0;
    for _ in 0..runs {
        let started = Instant::now();
        let masked = secrets.mask(text);
        times.push(started.elapsed());
        masked_rules = masked.rules.len();
    }
    let median = stats::percentile(&mut times, 0.5);
    let mb = text.len() as f64 / (1 << 20) as f64;
    println!(
        "{name}: {mb:.1} MB in {:.0} ms (median of {runs}), {:.0} MB/s; rules that masked: {masked_rules}",
        median.as_secs_f64() * 1e3,
        mb / median.as_secs_f64()
    );
    // "Well under 1 s" in the release build; the quick mode's debug build
    // takes 0.15-0.4 s on loaded cores, and a backtracking rule many times that.
    let bound = targets::pick(1.0, 2.0);
    targets::check(
        &format!("masking {name}, median"),
        format!("{:.0} ms", median.as_secs_f64() * 1e3),
        &format!("under {bound} s"),
        median.as_secs_f64() < bound,
    );
}

fn main() {
    let secrets = Secrets::from_lookup(&|name| {
        (name == "GITHUB_TOKEN").then(|| "ghp_benchToken000000000000000000000".to_owned())
    });
    // The rules compile once, on first use.
    let started = Instant::now();
    secrets.mask("warm up");
    println!(
        "compiling the rules: {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    );

    measure("clean 5 MB log", &secrets, &log(false));
    measure("5 MB log, a credential every 2,000 lines", &secrets, &log(true));

    let comment = (0..40).map(ordinary).collect::<String>();
    let mut times = Vec::new();
    for _ in 0..1_000 {
        let started = Instant::now();
        secrets.scrub(&comment);
        times.push(started.elapsed());
    }
    let p50: Duration = stats::percentile(&mut times, 0.5);
    println!(
        "a 4 KB progress comment: {:.1} µs (p50 of 1,000)",
        p50.as_secs_f64() * 1e6
    );
    targets::finish();
}
