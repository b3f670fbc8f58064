//! The listener's pages under `FORGEHAND_HTTP_TOKEN`, in a real browser:
//! headless Chromium (Debian's package, installed by scripts/dev-env.sh)
//! is given the token as the password of the address it opens, as a
//! person types it into the browser's prompt. It reads the status page and
//! the transcript of a run in flight, whose page then shows the run's
//! first step as its live events bring it. Without the token, or with a
//! wrong one, every page is refused with a challenge a browser answers
//! (Basic) and one a script answers (Bearer), and no answer carries a
//! CORS header.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::browser::{dump_dom, LivePage};
use forgehand_test_support::daemon_rig;
use forgehand_test_support::github_world::World;
use forgehand_test_support::mcp_client;
use forgehand_test_support::scripted_model::edit_and_commit;
use std::time::Duration;

const HTTP_TOKEN: &str = "page-token-for-browsers-0051";

/// The id of the run the status page links while the task is in flight.
async fn run_in_flight(address: &str, world: &World) -> String {
    let http = reqwest::Client::new();
    let mut status = String::new();
    for _ in 0..600 {
        let answer = http
            .get(format!("http://{address}/"))
            .bearer_auth(HTTP_TOKEN)
            .send()
            .await;
        status = match answer {
            Ok(answer) => answer.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        if status.contains("<h2>In flight (1)</h2>") {
            if let Some(at) = status.find("href=\"/tasks/") {
                return status[at + "href=\"/tasks/".len()..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "the status page never linked the run in flight: {status}\n{}",
        std::fs::read_to_string(world.log_path()).unwrap_or_default()
    );
}

/// Polls `expression` in `page` until it is true.
async fn wait_in_page(page: &mut LivePage, what: &str, expression: &str) {
    for _ in 0..300 {
        if page.evaluate(expression).await == true {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let text = page.evaluate("document.body.innerText").await;
    panic!("the page never showed {what}: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_and_a_live_transcript_open_in_a_browser_with_the_token() {
    let address = mcp_client::free_address();
    // The first answer is held 10 s (the page is opened meanwhile), the
    // second 10 s more.
    let mut turns = edit_and_commit(Duration::from_secs(10));
    turns[0].1 = Some(Duration::from_secs(10));
    // With a public address the token is required, as on a shared machine.
    let world = World::with_daemon_settings(
        turns,
        &format!("  http:\n    listen: \"{address}\"\n    public_url: \"http://{address}/\""),
    )
    .await;
    let mut env = world.env();
    env.push(("FORGEHAND_HTTP_TOKEN", HTTP_TOKEN.to_owned()));
    let daemon = daemon_rig::DaemonProcess::start(&world.config, &["run"], &env, &world.log_path());
    let issue = world.labelled_issue("Greet the world");
    let id = run_in_flight(&address, &world).await;

    // The transcript link a progress comment carries, opened with the token
    // as the password: the page loads, and its script's EventSource gets
    // the same credentials from the browser.
    let mut page = LivePage::open(&format!("http://reader:{HTTP_TOKEN}@{address}/tasks/{id}")).await;
    const STEPS: &str = "document.querySelectorAll('#entries details.step:not(.call-side)').length";
    assert_eq!(page.evaluate(STEPS).await, 0, "opened before the first answer");
    page.evaluate("window.openedOnce = true").await;
    wait_in_page(
        &mut page,
        "the first step, brought by the live events",
        &format!("{STEPS} === 1"),
    )
    .await;
    wait_in_page(
        &mut page,
        "the edit's diff in its step",
        "((document.querySelector('#entries details.step .body pre.diff') || {}).textContent || '').includes('+Hello, world')",
    )
    .await;
    assert_eq!(
        page.evaluate("window.openedOnce === true").await,
        true,
        "the page was never loaded again"
    );

    // The status page, rendered by the browser with the token.
    let status = dump_dom(&format!("http://anyone:{HTTP_TOKEN}@{address}/")).dom;
    assert!(
        status.contains("<h1>forgehand</h1>") && status.contains(&format!("href=\"/tasks/{id}\"")),
        "{status}"
    );
    // With a wrong password the browser is refused, and says so.
    let refused = dump_dom(&format!("http://anyone:wrong-{HTTP_TOKEN}@{address}/"));
    assert!(
        !refused.dom.contains("<h1>forgehand</h1>") && refused.said.contains("ERR_INVALID_AUTH_CREDENTIALS"),
        "{}\n{}",
        refused.dom,
        refused.said
    );

    world.wait_for_end(issue).await;
    wait_in_page(
        &mut page,
        "the run's end",
        "document.body.innerText.includes('The run ended') && document.body.innerText.includes('ended: delivered')",
    )
    .await;
    drop(page);
    drop(daemon);
}

/// How a request offers the token, and whether it should pass.
enum Offer {
    Nothing,
    Bearer(&'static str),
    Basic(&'static str, &'static str),
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_token_every_page_is_refused_with_both_challenges_and_no_cors() {
    let address = mcp_client::free_address();
    let world = World::with_daemon_settings(
        edit_and_commit(Duration::ZERO),
        &format!("  http:\n    listen: \"{address}\"\n    public_url: \"http://{address}/\""),
    )
    .await;
    let mut env = world.env();
    env.push(("FORGEHAND_HTTP_TOKEN", HTTP_TOKEN.to_owned()));
    let daemon = daemon_rig::DaemonProcess::start(&world.config, &["run"], &env, &world.log_path());
    mcp_client::wait_for_port(&address).await;

    let http = reqwest::Client::new();
    let refusals = [
        Offer::Nothing,
        Offer::Bearer("wrong"),
        Offer::Bearer(""),
        Offer::Basic("reader", "wrong"),
        Offer::Basic("reader", ""),
        // The token as the user name is not the password.
        Offer::Basic(HTTP_TOKEN, "wrong"),
    ];
    let passes = [
        Offer::Bearer(HTTP_TOKEN),
        Offer::Basic("reader", HTTP_TOKEN),
        Offer::Basic("", HTTP_TOKEN),
    ];
    // Past the token: the pages, and no run 1 (no issue was labelled).
    for (path, past_the_token) in [
        ("/", 200),
        ("/metrics", 200),
        ("/tasks/1", 404),
        ("/tasks/1/events", 204),
    ] {
        for (offer, passes) in refusals
            .iter()
            .map(|o| (o, false))
            .chain(passes.iter().map(|o| (o, true)))
        {
            let mut request = http
                .get(format!("http://{address}{path}"))
                .header("origin", "http://elsewhere.example");
            request = match offer {
                Offer::Nothing => request,
                Offer::Bearer(token) => request.bearer_auth(token),
                Offer::Basic(user, password) => request.basic_auth(user, Some(password)),
            };
            let answer = request.send().await.unwrap();
            let status = answer.status();
            let headers = answer.headers().clone();
            assert!(
                !headers
                    .keys()
                    .any(|name| name.as_str().starts_with("access-control-")),
                "{path}: {headers:?}"
            );
            if passes {
                assert_eq!(status, past_the_token, "{path}");
                continue;
            }
            assert_eq!(status, 401, "{path}");
            let challenges: Vec<&str> = headers
                .get_all("www-authenticate")
                .iter()
                .map(|v| v.to_str().unwrap())
                .collect();
            assert!(
                challenges
                    .iter()
                    .any(|c| c.starts_with("Basic realm=\"forgehand\""))
                    && challenges.iter().any(|c| c.starts_with("Bearer")),
                "{path}: {challenges:?}"
            );
            let body = answer.text().await.unwrap();
            assert!(
                body.contains("FORGEHAND_HTTP_TOKEN") && !body.contains(HTTP_TOKEN),
                "{body}"
            );
        }
    }
    // The probes ask for nothing.
    let health = http
        .get(format!("http://{address}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    drop(daemon);
}
