//! The transcript of a run, end to end: a scripted run's every model
//! answer, tool call, command (with its exit code) and edit (as a diff) is
//! in `forgehand tasks show ID`, and in its JSON Lines export, with the
//! secrets the model repeated masked and a note that says so.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::daemon_rig;
use forgehand_test_support::github_world::{World, MODEL_KEY, TOKEN};
use forgehand_test_support::scripted_model::{edit_and_commit, text};
use std::time::Duration;

fn forgehand(world: &World, args: &[&str]) -> String {
    world.forgehand(args)
}

/// The labels are set just before the run's end is journalled.
async fn wait_for_the_run_to_end(world: &World) {
    daemon_rig::wait_until(
        "the run to end",
        Duration::from_secs(30),
        async || !forgehand(world, &["tasks"]).contains("issue:1  running"),
        &world.log_path(),
    )
    .await;
}

#[tokio::test]
async fn a_runs_transcript_holds_every_call_command_and_edit_and_no_secret() {
    let mut turns = edit_and_commit(Duration::ZERO);
    turns.pop();
    turns.push((
        text(&format!(
            "Changed the greeting. (The token was {TOKEN}, the key {MODEL_KEY}.)"
        )),
        None,
    ));
    let world = World::new(turns).await;
    let (_, _daemon) = world.deliver_greeting(&[]).await;

    wait_for_the_run_to_end(&world).await;
    let listing = forgehand(&world, &["tasks"]);
    let line = listing
        .lines()
        .find(|l| l.contains("github:acme/app:issue:1"))
        .unwrap_or_else(|| panic!("{listing}"));
    assert!(line.contains("delivered"), "{line}");
    let id = line.split_whitespace().next().unwrap();

    let shown = forgehand(&world, &["tasks", "show", id]);
    assert!(
        shown.contains("~ reading the thread: gpt-4o-mini"),
        "the classification of the issue is a step too:\n{shown}"
    );
    assert!(shown.contains("text_editor_str_replace"), "{shown}");
    assert!(
        shown.contains("-Hello\n") && shown.contains("+Hello, world\n"),
        "the edit as a diff:\n{shown}"
    );
    assert!(
        shown.contains("command_executor_execute_command: exit code 0"),
        "{shown}"
    );
    assert!(
        shown.contains("Greet the whole world"),
        "the command's output:\n{shown}"
    );
    assert!(shown.contains("== ended: delivered"), "{shown}");
    assert!(!shown.contains(TOKEN) && !shown.contains(MODEL_KEY), "{shown}");

    let jsonl = forgehand(&world, &["tasks", "show", id, "--jsonl"]);
    let entries: Vec<serde_json::Value> = jsonl.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let kinds: Vec<&str> = entries.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["call", "model", "tool", "model", "tool", "model", "note", "note"],
        "{jsonl}"
    );
    // The answer that repeated the secrets is followed by a note that says
    // something was masked in it, and by which rule.
    assert_eq!(
        entries[6]["text"],
        "masked in the entry above (by rule, never the value): forgehand-secret"
    );
    assert_eq!(entries[0]["purpose"], "reading the thread");
    assert_eq!(entries[4]["exit_code"], 0);
    assert!(entries[2]["diff"].as_str().unwrap().contains("+Hello, world"));
    assert!(entries
        .iter()
        .all(|e| e["run"].as_i64() == id.parse().ok() && e["at_ms"].is_i64()));
    assert!(!jsonl.contains(TOKEN) && !jsonl.contains(MODEL_KEY));

    let missing = std::process::Command::new(daemon_rig::bin())
        .arg("--config")
        .arg(&world.config)
        .args(["tasks", "show", "99999"])
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no run 99999"));
}

#[tokio::test]
async fn the_transcript_page_shows_each_step_folded_with_its_diff_and_the_comment_links_it() {
    use forgehand_test_support::mcp_client;
    let address = mcp_client::free_address();
    let world = World::with_daemon_settings(
        edit_and_commit(Duration::ZERO),
        &format!("  http:\n    listen: \"{address}\"\n    public_url: \"http://{address}/\""),
    )
    .await;
    let mut env = world.env();
    env.push(("FORGEHAND_HTTP_TOKEN", "page-token-0007".to_owned()));
    let daemon = daemon_rig::DaemonProcess::start(&world.config, &["run"], &env, &world.log_path());
    let issue = world.labelled_issue("Greet the world");
    world.wait_for_end(issue).await;
    let progress = world.progress_comment(issue);
    let link = format!("http://{address}/tasks/");
    let at = progress.find(&link).unwrap_or_else(|| panic!("{progress}"));
    let id: String = progress[at + link.len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let url = format!("{link}{id}");
    wait_for_the_run_to_end(&world).await;

    let http = reqwest::Client::new();
    let refused = http.get(&url).send().await.unwrap();
    assert_eq!(refused.status(), 401, "the status page's token rule");
    let answer = http
        .get(&url)
        .bearer_auth("page-token-0007")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let html = answer.text().await.unwrap();
    assert_eq!(html.matches("<details class=\"step\">").count(), 3, "{html}");
    assert!(
        !html.contains("<details class=\"step\" open"),
        "steps start collapsed"
    );
    assert!(
        html.contains("<span class=\"del\">-Hello</span><span class=\"add\">+Hello, world</span>"),
        "{html}"
    );
    assert!(
        html.contains("command_executor_execute_command <span class=\"ok\">ok</span>"),
        "{html}"
    );
    assert!(html.contains("<div class=\"note\">ended: delivered"), "{html}");
    let missing = http
        .get(format!("{link}99999"))
        .bearer_auth("page-token-0007")
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);

    // What a reader sees: the page in a real browser, every step opened.
    let opened = html.replace("<details class=\"step\">", "<details class=\"step\" open>");
    forgehand_test_support::browser::screenshot(&opened, "transcript-page", 1280, 1400);
    drop(daemon);
}

#[tokio::test]
async fn the_transcript_page_of_a_run_in_flight_shows_each_step_as_it_happens() {
    use forgehand_test_support::browser::LivePage;
    use forgehand_test_support::mcp_client;
    let address = mcp_client::free_address();
    // The first answer is held 10 s (the page is opened meanwhile), the
    // second 10 s more (the page is read meanwhile, the run still in flight).
    let mut turns = edit_and_commit(Duration::from_secs(10));
    turns[0].1 = Some(Duration::from_secs(10));
    let world = World::with_daemon_settings(
        turns,
        // On loopback without a public address: no token, as a browser
        // opened on the daemon's machine reads it.
        &format!("  http:\n    listen: \"{address}\""),
    )
    .await;
    let daemon = daemon_rig::DaemonProcess::start(&world.config, &["run"], &world.env(), &world.log_path());
    let issue = world.labelled_issue("Greet the world");
    // The status page links the run's transcript while it is in flight.
    let link = format!("http://{address}/tasks/");
    let mut id = String::new();
    let mut status = String::new();
    for _ in 0..600 {
        status = match reqwest::get(format!("http://{address}/")).await {
            Ok(answer) => answer.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        if status.contains("Greet the world") || status.contains("#1") {
            if let Some(at) = status.find("href=\"/tasks/") {
                id = status[at + "href=\"/tasks/".len()..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !id.is_empty(),
        "the status page never linked the run in flight: {status}\n{}",
        std::fs::read_to_string(world.log_path()).unwrap_or_default()
    );

    let mut page = LivePage::open(&format!("{link}{id}")).await;
    const STEPS: &str = "document.querySelectorAll('#entries details.step:not(.call-side)').length";
    assert_eq!(page.evaluate(STEPS).await, 0, "opened before the first answer");
    page.evaluate("window.openedOnce = true").await;
    let mut steps = 0;
    for _ in 0..300 {
        steps = page.evaluate(STEPS).await.as_u64().unwrap();
        if steps > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(steps, 1, "the first step appeared on the open page");
    // The edit's result lands in its step, as a diff, while the second
    // answer is still awaited; the page was never loaded again.
    let mut diff = serde_json::Value::Null;
    for _ in 0..100 {
        diff = page
            .evaluate(
                "(document.querySelector('#entries details.step .body pre.diff') || {}).textContent || null",
            )
            .await;
        if !diff.is_null() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(diff.as_str().unwrap().contains("+Hello, world"), "{diff}");
    assert_eq!(page.evaluate("window.openedOnce === true").await, true);
    let text = page.evaluate("document.body.innerText").await;
    assert!(
        !text.as_str().unwrap().contains("ended:"),
        "still in flight: {text}"
    );

    // At its end the page says so, and the ended note is there.
    world.wait_for_end(issue).await;
    let mut ended = serde_json::Value::Null;
    for _ in 0..100 {
        ended = page.evaluate("document.body.innerText").await;
        if ended.as_str().unwrap().contains("The run ended") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ended = ended.as_str().unwrap();
    assert!(
        ended.contains("The run ended") && ended.contains("ended: delivered"),
        "{ended}"
    );
    drop(daemon);
}
