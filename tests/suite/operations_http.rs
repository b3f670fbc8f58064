//! The daemon's HTTP listener, end to end: the real daemon, a fake GitHub,
//! a real git remote, real Docker, the scripted model. The probes answer
//! without a token, everything else asks for it; after a scripted task the
//! metrics show the task, its tokens and its cost (in the text format a
//! strict parser and `promtool check metrics` read, or in OpenMetrics when
//! asked for), and the status page lists it with its pull request and a
//! link to its transcript.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::daemon_rig;
use forgehand_test_support::github_world;
use forgehand_test_support::mcp_client;
use forgehand_test_support::metrics_text;
use forgehand_test_support::scripted_model;

use github_world::{World, DONE, REPO};
use scripted_model::edit_and_commit;
use std::time::Duration;

const HTTP_TOKEN: &str = "status-page-token-that-must-never-leak-01";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_metrics_and_the_status_page_after_a_task() {
    let address = mcp_client::free_address();
    let world = World::with_daemon_settings(
        edit_and_commit(Duration::ZERO),
        &format!("  http:\n    listen: \"{address}\""),
    )
    .await;
    let gh = &world.github;
    let issue = world.labelled_issue("Greet the world");
    let mut env: Vec<(&str, String)> = world.env().into_iter().collect();
    env.push(("FORGEHAND_HTTP_TOKEN", HTTP_TOKEN.to_owned()));
    let mut daemon = daemon_rig::DaemonProcess::start(&world.config, &["run"], &env, &world.log_path());
    mcp_client::wait_for_port(&address).await;
    world.wait_for_end(issue).await;
    assert_eq!(
        gh.issue(REPO, issue).labels,
        vec![DONE.to_owned()],
        "{}",
        daemon.log_text()
    );

    let http = reqwest::Client::new();
    let get = |path: &str, token: Option<&str>| {
        let mut request = http.get(format!("http://{address}{path}"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    let health = get("/healthz", None).await.unwrap();
    assert_eq!(health.status(), 200);
    assert!(health
        .text()
        .await
        .unwrap()
        .starts_with("ok: the poll loop ticked"));
    let ready = get("/readyz", None).await.unwrap();
    let status = ready.status();
    let body = ready.text().await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("docker: ok") && body.contains("github: ok"),
        "{body}"
    );

    // Without the token: refused, and the token never appears anywhere.
    for path in ["/metrics", "/"] {
        let refused = get(path, None).await.unwrap();
        assert_eq!(refused.status(), 401, "{path}");
        assert_eq!(get(path, Some("wrong")).await.unwrap().status(), 401);
    }

    // The label changes a moment before the task has wound down. A scraper
    // that does not ask for OpenMetrics reads the text format 0.0.4.
    let mut metrics = String::new();
    for _ in 0..100 {
        let answer = get("/metrics", Some(HTTP_TOKEN)).await.unwrap();
        assert_eq!(
            answer.headers()["content-type"],
            "text/plain; version=0.0.4; charset=utf-8"
        );
        metrics = answer.text().await.unwrap();
        if metrics.contains("forgehand_tasks_ended_total") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let families = metrics_text::parse(&metrics).unwrap_or_else(|e| panic!("{e} in\n{metrics}"));
    let counters: Vec<&str> = families
        .iter()
        .filter(|f| f.kind == "counter")
        .map(|f| f.name.as_str())
        .collect();
    assert!(
        counters.contains(&"forgehand_tasks_started_total"),
        "{counters:?}"
    );
    assert!(counters.iter().all(|c| c.ends_with("_total")), "{counters:?}");
    metrics_text::promtool_check(&metrics).unwrap();
    let openmetrics = http
        .get(format!("http://{address}/metrics"))
        .bearer_auth(HTTP_TOKEN)
        .header(
            "accept",
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(
        openmetrics.headers()["content-type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let openmetrics = openmetrics.text().await.unwrap();
    assert!(openmetrics.ends_with("# EOF\n"), "{openmetrics}");
    assert!(
        openmetrics.contains("# TYPE forgehand_tasks_started counter\n")
            && openmetrics.contains("forgehand_tasks_started_total{forge=\"github\"} 1\n"),
        "{openmetrics}"
    );
    for line in [
        "forgehand_tasks_started_total{forge=\"github\"} 1",
        "forgehand_tasks_ended_total{outcome=\"delivered\"} 1",
        "forgehand_task_duration_seconds_count{outcome=\"delivered\"} 1",
        "forgehand_model_requests_total{model=\"gpt-4o-mini\",outcome=\"ok\"}",
        "forgehand_model_tokens_total{model=\"gpt-4o-mini\",kind=\"input\"}",
        "forgehand_model_cost_usd_total{model=\"gpt-4o-mini\"}",
        "forgehand_tool_calls_total{tool=\"text_editor_str_replace\",outcome=\"ok\"} 1",
        "forgehand_forge_api_calls_total{forge=\"github\",status=\"200\"}",
        "forgehand_forge_rate_limit_remaining{forge=\"github\"}",
        "forgehand_phase_duration_seconds_count{phase=\"change\"} 1",
        "forgehand_sandboxes_running 0",
        "forgehand_journal_bytes",
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
    let cost: f64 = metrics
        .lines()
        .find(|l| l.starts_with("forgehand_model_cost_usd_total{model=\"gpt-4o-mini\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .unwrap()
        .parse()
        .unwrap();
    assert!(cost > 0.0, "{cost}");

    let page = get("/", Some(HTTP_TOKEN)).await.unwrap().text().await.unwrap();
    assert!(page.contains("<h2>In flight (0)</h2>"), "{page}");
    assert!(
        page.contains("acme/app#1") && page.contains("https://github.example/acme/app/pull/2"),
        "{page}"
    );
    assert!(page.contains("Forge rate limits"));
    // The ended task's row links its run's transcript, which opens.
    let run = page
        .split("<a href=\"/tasks/")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no transcript link in {page}"))
        .to_owned();
    let transcript = get(&format!("/tasks/{run}"), Some(HTTP_TOKEN)).await.unwrap();
    assert_eq!(transcript.status(), 200);
    assert!(transcript
        .text()
        .await
        .unwrap()
        .contains(&format!("Run {run}: github:{REPO}:issue:{issue}")));
    assert!(!page.contains(HTTP_TOKEN) && !metrics.contains(HTTP_TOKEN));
    assert!(!daemon.log_text().contains(HTTP_TOKEN));

    // The same from the journal on the command line.
    let tasks = std::process::Command::new(env!("CARGO_BIN_EXE_forgehand"))
        .arg("--config")
        .arg(&world.config)
        .arg("tasks")
        .output()
        .unwrap();
    assert!(tasks.status.success());
    let text = String::from_utf8(tasks.stdout).unwrap();
    assert!(
        text.contains("In flight (0)")
            && text.contains("Waiting (0):\n  none")
            && text.contains("acme/app#1"),
        "{text}"
    );
    assert!(text.contains("https://github.example/acme/app/pull/2"), "{text}");
    assert!(daemon.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_state_disk_stops_claiming_says_why_and_loses_nothing() {
    let address = mcp_client::free_address();
    // More free space than any disk has: the daemon must see it as full.
    let world = World::with_daemon_settings(
        edit_and_commit(Duration::ZERO),
        &format!("  min_free_space: \"100000t\"\n  http:\n    listen: \"{address}\""),
    )
    .await;
    let gh = &world.github;
    let issue = world.labelled_issue("Greet the world");
    let mut daemon = world.start();
    mcp_client::wait_for_port(&address).await;
    // Once the daemon knows the disk is full, two polls that list the
    // issue pass; it is not claimed.
    daemon_rig::wait_until(
        "the daemon seeing the disk full",
        Duration::from_secs(60),
        async || daemon.log_text().contains("not claiming new tasks"),
        &world.log_path(),
    )
    .await;
    world.two_polls_since(gh.requests().len()).await;
    assert_eq!(gh.issue(REPO, issue).labels, vec!["coding agent".to_owned()]);
    let ready = reqwest::get(format!("http://{address}/readyz")).await.unwrap();
    assert_eq!(ready.status(), 503);
    let body = ready.text().await.unwrap();
    assert!(
        body.contains("claiming: FAIL") && body.contains("daemon.min_free_space"),
        "{body}"
    );
    assert!(reqwest::get(format!("http://{address}/healthz"))
        .await
        .unwrap()
        .status()
        .is_success());
    assert!(daemon.terminate().success());
    let log = daemon.log_text();
    assert!(log.contains("not claiming new tasks"), "{log}");
    assert!(world.model.all_requests().await.is_empty());

    // With space again, the same issue is worked as usual.
    let config = std::fs::read_to_string(&world.config)
        .unwrap()
        .replace("100000t", "1m");
    std::fs::write(&world.config, config).unwrap();
    let mut daemon = world.start();
    daemon_rig::wait_until(
        "the done label alone",
        Duration::from_secs(180),
        async || gh.issue(REPO, issue).labels == vec![DONE.to_owned()],
        &world.log_path(),
    )
    .await;
    assert!(daemon.terminate().success());
}
