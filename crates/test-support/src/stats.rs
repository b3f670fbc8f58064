//! Percentiles and the one-line report every benchmark prints.
#![allow(clippy::print_stdout)]

use std::time::Duration;

pub fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[index]
}

pub fn report(name: &str, samples: &mut [Duration]) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{name:<40} n={:<5} median {:>8.2} ms   p90 {:>8.2} ms   p99 {:>8.2} ms   min {:>8.2} ms",
        samples.len(),
        ms(percentile(samples, 0.5)),
        ms(percentile(samples, 0.9)),
        ms(percentile(samples, 0.99)),
        ms(percentile(samples, 0.0)),
    );
}
