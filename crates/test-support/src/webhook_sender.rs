//! Webhook deliveries as a forge sends them: a POST of the JSON payload
//! with the forge's headers, signed the forge's way (GitHub: HMAC-SHA256
//! in `X-Hub-Signature-256`; GitLab: the secret token in `X-Gitlab-Token`).
//! Tests can lose deliveries (a missed one), send each twice (a
//! redelivery) and read what the receiver answered.

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

#[derive(Clone, Debug)]
pub enum Signing {
    /// The webhook's secret, GitHub's way.
    GitHub(String),
    /// The webhook's secret token, GitLab's way.
    GitLab(String),
}

/// One delivery made, and the receiver's answer (`None`: lost on purpose).
#[derive(Clone, Debug)]
pub struct Sent {
    pub id: String,
    pub event: String,
    pub status: Option<u16>,
    /// When it was sent, from the sender's start.
    pub at: std::time::Instant,
}

struct Outgoing {
    id: String,
    event: String,
    body: Vec<u8>,
}

#[derive(Default)]
struct Control {
    lose_next: usize,
    twice: bool,
    sent: Vec<Sent>,
}

#[derive(Clone)]
pub struct WebhookSender {
    queue: mpsc::UnboundedSender<Outgoing>,
    control: Arc<Mutex<Control>>,
}

impl WebhookSender {
    /// Sends to `url` from a task of the current runtime, in order.
    pub fn start(url: &str, signing: Signing) -> WebhookSender {
        let (queue, mut outgoing) = mpsc::unbounded_channel::<Outgoing>();
        let control = Arc::new(Mutex::new(Control::default()));
        let (url, shared) = (url.to_owned(), control.clone());
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            while let Some(delivery) = outgoing.recv().await {
                let (lose, twice) = {
                    let mut c = shared.lock().unwrap();
                    let lose = c.lose_next > 0;
                    c.lose_next = c.lose_next.saturating_sub(1);
                    (lose, c.twice)
                };
                let times = if lose {
                    0
                } else if twice {
                    2
                } else {
                    1
                };
                if lose {
                    shared.lock().unwrap().sent.push(sent(&delivery, None));
                }
                for _ in 0..times {
                    let status = post(&client, &url, &signing, &delivery).await;
                    shared.lock().unwrap().sent.push(sent(&delivery, Some(status)));
                }
            }
        });
        WebhookSender { queue, control }
    }

    /// Queues a delivery of `event` with `payload`.
    pub fn send(&self, event: &str, payload: &Value) {
        let _ = self.queue.send(Outgoing {
            id: uuid_like(),
            event: event.to_owned(),
            body: serde_json::to_vec(payload).unwrap(),
        });
    }

    /// The next `n` deliveries are never sent (a missed delivery).
    pub fn lose_next(&self, n: usize) {
        self.control.lock().unwrap().lose_next = n;
    }

    /// From now on every delivery is sent twice with the same id.
    pub fn send_twice(&self) {
        self.control.lock().unwrap().twice = true;
    }

    pub fn sent(&self) -> Vec<Sent> {
        self.control.lock().unwrap().sent.clone()
    }
}

fn sent(delivery: &Outgoing, status: Option<u16>) -> Sent {
    Sent {
        id: delivery.id.clone(),
        event: delivery.event.clone(),
        status,
        at: std::time::Instant::now(),
    }
}

async fn post(client: &reqwest::Client, url: &str, signing: &Signing, delivery: &Outgoing) -> u16 {
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .body(delivery.body.clone());
    request = match signing {
        Signing::GitHub(secret) => request
            .header("user-agent", "GitHub-Hookshot/fake")
            .header("x-github-event", &delivery.event)
            .header("x-github-delivery", &delivery.id)
            .header("x-hub-signature-256", github_signature(secret, &delivery.body)),
        Signing::GitLab(token) => request
            .header("user-agent", "GitLab/fake")
            .header("x-gitlab-event", &delivery.event)
            .header("x-gitlab-event-uuid", &delivery.id)
            .header("x-gitlab-token", token),
    };
    match request.send().await {
        Ok(answer) => answer.status().as_u16(),
        Err(_) => 0,
    }
}

/// `sha256=` and the hex HMAC-SHA256 of `body` under `secret`.
pub fn github_signature(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

fn uuid_like() -> String {
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        fastrand::u32(..),
        fastrand::u16(..),
        fastrand::u16(..),
        fastrand::u16(..),
        fastrand::u64(..) & 0xffff_ffff_ffff
    )
}
