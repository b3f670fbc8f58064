//! A page as a reader sees it: rendered by headless Chromium (Debian's
//! package; scripts/dev-env.sh installs it) into `target/<name>.png`, to
//! look at after the test.

/// Renders `html` at `width` x `height` into `target/<name>.png`; checks
/// that a picture of that size came out and that it is not blank (a page
/// of text and tables compresses far less than an empty one).
pub fn screenshot(html: &str, name: &str, width: u32, height: u32) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join(format!("{name}.html"));
    std::fs::write(&page, html).unwrap();
    let png = crate::repo_root().join(format!("target/{name}.png"));
    // `target/` is not there when the build goes to another CARGO_TARGET_DIR.
    std::fs::create_dir_all(png.parent().unwrap()).unwrap();
    let _ = std::fs::remove_file(&png);
    let profile = tempfile::tempdir().unwrap();
    let out = chromium(profile.path())
        .arg("--hide-scrollbars")
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap_or_else(|e| panic!("{}", missing(&e)));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    let size = (
        u32::from_be_bytes(bytes[16..20].try_into().unwrap()),
        u32::from_be_bytes(bytes[20..24].try_into().unwrap()),
    );
    assert_eq!(size, (width, height));
    assert!(
        bytes.len() > 20_000,
        "{} bytes: the page looks empty",
        bytes.len()
    );
    bytes
}

/// A page kept open in headless Chromium, whose document a test reads as
/// it changes (the live transcript page): the browser is driven through
/// the DevTools protocol on a loopback port of its own.
pub struct LivePage {
    // Ended before its profile folder is removed (fields drop in order).
    _browser: Running,
    socket: tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    next_id: u64,
    _profile: tempfile::TempDir,
}

impl LivePage {
    /// Opens `url` (a loopback address) in a new headless Chromium. A
    /// user name and password in `url` answer the server's Basic
    /// challenge, as a person would in the browser's prompt.
    pub async fn open(url: &str) -> LivePage {
        let profile = tempfile::tempdir().unwrap();
        // Ended however this function ends, a panic included.
        let browser = Running(
            chromium(profile.path())
                .args([
                    "--remote-debugging-address=127.0.0.1",
                    "--remote-debugging-port=0",
                ])
                .arg(url)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("{}", missing(&e))),
        );
        // Chromium writes the port it chose into the profile.
        let port_file = profile.path().join("DevToolsActivePort");
        let mut port = None;
        for _ in 0..300 {
            if let Some(p) = std::fs::read_to_string(&port_file)
                .ok()
                .and_then(|s| s.lines().next().and_then(|l| l.trim().parse::<u16>().ok()))
            {
                port = Some(p);
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        let port = port.expect("Chromium never said its DevTools port");
        let mut page_socket = None;
        for _ in 0..100 {
            let targets: serde_json::Value =
                match reqwest::get(format!("http://127.0.0.1:{port}/json/list")).await {
                    Ok(answer) => answer.json().await.unwrap_or_default(),
                    Err(_) => serde_json::Value::Null,
                };
            page_socket = targets.as_array().into_iter().flatten().find_map(|t| {
                (t["type"] == "page" && t["url"].as_str().is_some_and(|u| u.starts_with(url)))
                    .then(|| t["webSocketDebuggerUrl"].as_str().map(str::to_owned))
                    .flatten()
            });
            if page_socket.is_some() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        let page_socket = page_socket.expect("Chromium opened no page for the address");
        let (socket, _) = tokio_tungstenite::connect_async(page_socket.as_str())
            .await
            .unwrap();
        let mut page = LivePage {
            _browser: browser,
            socket,
            next_id: 0,
            _profile: profile,
        };
        // The target is listed as soon as its navigation starts: wait for
        // the document of `url` itself, loaded. Its `location` leaves out
        // the user name and password `url` may carry.
        let loaded = format!(
            "document.readyState === 'complete' && location.href.startsWith({})",
            serde_json::Value::String(without_userinfo(url))
        );
        for _ in 0..300 {
            if page.evaluate(&loaded).await == true {
                return page;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!("Chromium never loaded {url}");
    }

    /// The value of the JavaScript `expression` in the page now.
    pub async fn evaluate(&mut self, expression: &str) -> serde_json::Value {
        use futures_util::{SinkExt, StreamExt};
        self.next_id += 1;
        let id = self.next_id;
        let ask = serde_json::json!({
            "id": id,
            "method": "Runtime.evaluate",
            "params": {"expression": expression, "returnByValue": true},
        });
        self.socket
            .send(tokio_tungstenite::tungstenite::Message::text(ask.to_string()))
            .await
            .unwrap();
        while let Some(message) = self.socket.next().await {
            let message = message.unwrap();
            let Ok(text) = message.to_text() else { continue };
            let answer: serde_json::Value = serde_json::from_str(text).unwrap_or_default();
            if answer["id"] == id {
                assert!(answer["result"]["exceptionDetails"].is_null(), "{answer}");
                return answer["result"]["result"]["value"].clone();
            }
        }
        panic!("Chromium closed the page's connection");
    }
}

/// A browser process, ended when dropped.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What headless Chromium made of an address: the rendered document, and
/// what it said on stderr (where a page that did not load says why, e.g.
/// `net::ERR_INVALID_AUTH_CREDENTIALS`).
pub struct Rendered {
    pub dom: String,
    pub said: String,
}

/// `url` (a loopback address) as headless Chromium renders it once the
/// page has loaded and run its scripts. A user name and password in `url`
/// answer the server's Basic challenge.
pub fn dump_dom(url: &str) -> Rendered {
    let profile = tempfile::tempdir().unwrap();
    let out = chromium(profile.path())
        .args(["--dump-dom", "--virtual-time-budget=2000"])
        .arg(url)
        .output()
        .unwrap_or_else(|e| panic!("{}", missing(&e)));
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{said}");
    Rendered {
        dom: String::from_utf8(out.stdout).unwrap(),
        said,
    }
}

/// Headless Chromium with a fresh profile at `profile`, nothing running
/// in the background (no updates, sync or first-run pages: the only
/// traffic is the test's own, to loopback).
fn chromium(profile: &std::path::Path) -> std::process::Command {
    let mut command = std::process::Command::new("chromium");
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.display()));
    command
}

fn missing(error: &std::io::Error) -> String {
    format!(
        "cannot start chromium ({error}): the page tests need Debian's chromium package; \
         scripts/dev-env.sh installs it (apt-get install -y chromium)"
    )
}

/// `url` without the user name and password it may carry.
fn without_userinfo(url: &str) -> String {
    let mut parsed = url::Url::parse(url).unwrap();
    parsed.set_username("").unwrap();
    parsed.set_password(None).unwrap();
    parsed.to_string()
}
