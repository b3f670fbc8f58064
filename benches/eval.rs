//! `forgehand eval`'s own cost: per instance, the wall time less the time
//! spent waiting on the model (scripted, answering at once) and running
//! setup and the tests in the scoring sandbox. What is left is the
//! evaluation's overhead: the mirror and origin, the task's pipeline
//! (clone, sandbox, copy in and out, push), the patch, the scoring checkout
//! and its sandbox. Real Docker, real git; 8 instances, one at a time, then
//! 4 at a time.
//!
//! Run: `cargo bench --bench eval` (needs Docker and the images, as
//! `scripts/test` prepares them).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use forgehand_test_support::eval_fixture::{self, instance, source_repository};
use forgehand_test_support::github_world::MODEL_KEY;
use forgehand_test_support::{daemon_rig, stats};
use serde_json::Value;
use std::time::{Duration, Instant};

const INSTANCES: usize = 8;

#[tokio::main]
async fn main() {
    forgehand_test_support::ensure_images().await;
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let (base, _) = source_repository(&source);
    let lines: Vec<String> = (1..=INSTANCES)
        .map(|n| instance(&format!("calc-{n}"), &source, &base, "python3 -m unittest {test}").to_string())
        .collect();
    let file = dir.path().join("instances.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let model = eval_fixture::model().await;
    let instance_id = forgehand_test_support::unique("bench-eval");
    let config = daemon_rig::write_config(dir.path(), &instance_id, "");
    let env = vec![
        ("OPENAI_API_KEY", MODEL_KEY.to_owned()),
        ("OPENAI_BASE_URL", model.base_url()),
    ];
    for concurrency in ["1", "4"] {
        let out = dir.path().join(format!("out-{concurrency}"));
        let started = Instant::now();
        let (status, stdout) = daemon_rig::run_to_end(
            &config,
            &[
                "eval",
                file.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
                "--concurrency",
                concurrency,
            ],
            &env,
            &dir.path().join("eval.log"),
        )
        .await;
        let took = started.elapsed();
        assert!(status.success(), "{stdout}");
        let report: Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
        let instances = report["instances"].as_array().unwrap();
        assert_eq!(report["totals"]["resolved"], INSTANCES, "{stdout}");
        let ms = |key: &str| -> Vec<Duration> {
            instances
                .iter()
                .map(|i| Duration::from_millis(i[key].as_u64().unwrap()))
                .collect()
        };
        let overhead: Vec<Duration> = instances
            .iter()
            .map(|i| {
                let [wall, model, tests] =
                    ["wall_ms", "model_ms", "tests_ms"].map(|k| i[k].as_u64().unwrap());
                Duration::from_millis(wall - model - tests)
            })
            .collect();
        println!(
            "concurrency {concurrency}: {INSTANCES} instances in {:.1} s",
            took.as_secs_f64()
        );
        stats::report("eval overhead per instance", &mut overhead.clone());
        stats::report("eval wall per instance", &mut ms("wall_ms"));
        stats::report("  of it the model", &mut ms("model_ms"));
        stats::report("  of it setup and tests", &mut ms("tests_ms"));
    }
}
