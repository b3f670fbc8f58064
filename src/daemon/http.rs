//! The daemon's HTTP listener (`daemon.http.listen`): `/healthz` (the
//! process and its poll loop are alive), `/readyz` (config valid, Docker
//! reachable, every watched forge answered its last poll), `/metrics` (the
//! Prometheus text format) and `/`, a small server-rendered status page.
//! With `FORGEHAND_HTTP_TOKEN` set, everything but the two probes asks for
//! the token, as a Bearer token or a browser's Basic password (see
//! [`access`]). With `daemon.webhooks`, the forges'
//! deliveries are taken at `POST /webhooks/github` and `/webhooks/gitlab`;
//! they prove themselves with their own secret instead (see
//! [`crate::webhooks`]).

use crate::config::Secret;
use crate::html::escape;
use crate::journal::Journal;
use crate::sandbox::SandboxBackend;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio_util::sync::CancellationToken;

mod access;
mod live;

use access::refuse;

/// What the poll loop reports for the probes.
pub struct Health {
    started: Instant,
    /// Milliseconds after `started` of the loop's last tick.
    last_tick: AtomicU64,
    poll_interval: Duration,
    /// Per forge: `Err` with the last poll's error.
    forges: Mutex<BTreeMap<String, Result<(), String>>>,
    /// Why the daemon does not claim new tasks, when it does not.
    not_claiming: Mutex<Option<String>>,
}

impl Health {
    pub fn new(poll_interval: Duration) -> Health {
        Health {
            started: Instant::now(),
            last_tick: AtomicU64::new(0),
            poll_interval,
            forges: Mutex::new(BTreeMap::new()),
            not_claiming: Mutex::new(None),
        }
    }

    /// The poll loop is alive.
    pub fn tick(&self) {
        self.last_tick
            .store(self.started.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    pub fn set_forge(&self, forge: &str, answered: Result<(), String>) {
        self.forges
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(forge.to_owned(), answered);
    }

    pub fn set_not_claiming(&self, why: Option<String>) {
        *self.not_claiming.lock().unwrap_or_else(|p| p.into_inner()) = why;
    }

    /// Time since the loop last ticked.
    pub fn since_tick(&self) -> Duration {
        let now = self.started.elapsed().as_millis() as u64;
        Duration::from_millis(now.saturating_sub(self.last_tick.load(Ordering::Relaxed)))
    }

    /// Alive: the loop ticked within three poll intervals (and a minute's slack).
    pub fn alive(&self) -> bool {
        self.since_tick() <= self.poll_interval * 3 + Duration::from_secs(60)
    }
}

pub struct HttpState {
    pub health: Arc<Health>,
    pub journal: Arc<Journal>,
    pub backend: Arc<dyn SandboxBackend>,
    pub token: Option<Secret>,
    pub instance: String,
    pub board: Arc<crate::task::board::Board>,
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The runs in flight, for their live transcript pages.
    pub live: Arc<crate::transcript::LiveRuns>,
    /// Webhook deliveries are checked here and rung on `doorbells`.
    pub webhooks: Option<Webhooks>,
}

pub struct Webhooks {
    pub receiver: crate::webhooks::Receiver,
    pub doorbells: tokio::sync::mpsc::Sender<crate::webhooks::Doorbell>,
}

/// GitHub sends payloads of up to 25 MB.
const LARGEST_DELIVERY: usize = 25 << 20;

/// Serves until `shutdown`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<HttpState>,
    shutdown: CancellationToken,
) -> Result<(), String> {
    let router = axum::Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/", get(status_page))
        .route("/tasks/{id}", get(transcript_page))
        .route("/tasks/{id}/events", get(live::transcript_events))
        .route(
            "/webhooks/{forge}",
            axum::routing::post(webhook).layer(axum::extract::DefaultBodyLimit::max(LARGEST_DELIVERY)),
        )
        .with_state(state);
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
        .map_err(|e| format!("the HTTP listener stopped: {e}"))
}

fn text(status: StatusCode, body: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

async fn healthz(State(state): State<Arc<HttpState>>) -> Response {
    let since = state.health.since_tick();
    if state.health.alive() {
        text(
            StatusCode::OK,
            format!("ok: the poll loop ticked {} s ago\n", since.as_secs()),
        )
    } else {
        text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "unhealthy: the poll loop has not ticked for {} s\n",
                since.as_secs()
            ),
        )
    }
}

async fn readyz(State(state): State<Arc<HttpState>>) -> Response {
    let mut lines = vec!["config: ok (loaded and validated)".to_owned()];
    let mut ready = true;
    match tokio::time::timeout(Duration::from_secs(3), state.backend.ping()).await {
        Ok(Ok(())) => lines.push("docker: ok".into()),
        Ok(Err(e)) => {
            ready = false;
            lines.push(format!("docker: FAIL: {e}"));
        }
        Err(_) => {
            ready = false;
            lines.push("docker: FAIL: the engine did not answer within 3 s".into());
        }
    }
    let forges = state
        .health
        .forges
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    if forges.is_empty() {
        ready = false;
        lines.push("forges: FAIL: no poll has finished yet".into());
    }
    for (forge, answered) in forges {
        match answered {
            Ok(()) => lines.push(format!("{forge}: ok (answered its last poll)")),
            Err(e) => {
                ready = false;
                lines.push(format!("{forge}: FAIL: {e}"));
            }
        }
    }
    if let Some(why) = state
        .health
        .not_claiming
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
    {
        ready = false;
        lines.push(format!("claiming: FAIL: {why}"));
    }
    let body = lines.join("\n") + "\n";
    text(
        if ready {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        },
        body,
    )
}

/// One delivery: 202 when it rang, 200 for a repeat or an unreadable
/// payload, 204 for an event forgehand does not act on, 401 when it is not
/// signed with the secret, 413 when it is over [`LARGEST_DELIVERY`].
async fn webhook(
    State(state): State<Arc<HttpState>>,
    axum::extract::Path(forge): axum::extract::Path<String>,
    headers: HeaderMap,
    body: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    use crate::webhooks::{Delivery, Received};
    let Some(webhooks) = &state.webhooks else {
        return text(
            StatusCode::NOT_FOUND,
            "webhooks are off here (daemon.webhooks: false)\n".into(),
        );
    };
    let kind = match forge.as_str() {
        "github" => crate::forge::ForgeKind::GitHub,
        "gitlab" => crate::forge::ForgeKind::GitLab,
        _ => {
            return text(
                StatusCode::NOT_FOUND,
                "use /webhooks/github or /webhooks/gitlab\n".into(),
            )
        }
    };
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let body = match body {
        Ok(body) => body,
        Err(rejection) => return unread_delivery(&state, kind, &header, rejection),
    };
    let received = webhooks.receiver.receive(
        kind,
        &Delivery {
            header: &header,
            body: &body,
        },
    );
    state.metrics.webhook_delivery(kind.as_str(), received.outcome());
    match received {
        Received::Accepted(doorbell) => {
            tracing::debug!(forge = %forge, repo = %doorbell.repo, topic = ?doorbell.topic, "webhook delivery");
            if webhooks.doorbells.try_send(doorbell).is_err() {
                // The loop is busy with earlier bells; its next poll sees this too.
                tracing::debug!("doorbells queue full; the next poll will see this delivery's change");
            }
            text(StatusCode::ACCEPTED, "polling it now\n".into())
        }
        Received::Duplicate => text(StatusCode::OK, "delivery seen before; ignored\n".into()),
        Received::Ignored(event) => {
            tracing::debug!(forge = %forge, event = %event, "webhook delivery of an event forgehand does not act on");
            StatusCode::NO_CONTENT.into_response()
        }
        Received::Refused(why) => {
            tracing::warn!(forge = %forge, "refused a webhook delivery: {why}");
            text(StatusCode::UNAUTHORIZED, format!("{why}\n"))
        }
        Received::Malformed(why) => {
            // Authentic: a failure status would only get the webhook switched off.
            tracing::warn!(forge = %forge, "a webhook delivery that cannot be read, ignored: {why}");
            text(StatusCode::OK, format!("ignored: {why}\n"))
        }
    }
}

/// A delivery whose body was not read: over [`LARGEST_DELIVERY`] (logged
/// and counted as `too_large`), or cut off.
fn unread_delivery(
    state: &HttpState,
    kind: crate::forge::ForgeKind,
    header: &dyn Fn(&str) -> Option<String>,
    rejection: axum::extract::rejection::BytesRejection,
) -> Response {
    let status = rejection.status();
    if status != StatusCode::PAYLOAD_TOO_LARGE {
        tracing::warn!(
            forge = kind.as_str(),
            "a webhook delivery whose body could not be read: {rejection}"
        );
        return rejection.into_response();
    }
    state.metrics.webhook_delivery(kind.as_str(), "too_large");
    // Unauthenticated: only a short, printable part of each header is logged.
    let named = |name: &str| -> String {
        let value = header(name).unwrap_or_default();
        value.chars().filter(|c| !c.is_control()).take(100).collect()
    };
    let (event, id) = match kind {
        crate::forge::ForgeKind::GitHub => (named("x-github-event"), named("x-github-delivery")),
        _ => (
            named("x-gitlab-event"),
            Some(named("x-gitlab-event-uuid"))
                .filter(|id| !id.is_empty())
                .unwrap_or_else(|| named("x-gitlab-webhook-uuid")),
        ),
    };
    tracing::warn!(
        forge = kind.as_str(),
        event = %event,
        delivery = %id,
        length = %named("content-length"),
        "refused a webhook delivery over {} MiB; the next poll sees what it was about",
        LARGEST_DELIVERY >> 20
    );
    text(
        status,
        format!(
            "a delivery over {} MiB is not read; the next poll sees what it was about\n",
            LARGEST_DELIVERY >> 20
        ),
    )
}

async fn metrics(State(state): State<Arc<HttpState>>, headers: HeaderMap) -> Response {
    if let Some(refused) = refuse(&state, &headers) {
        return refused;
    }
    let m = &state.metrics;
    m.set_journal_bytes(state.journal.size_bytes());
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let format = crate::metrics::Exposition::asked_for(accept);
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, format.content_type()),
            (header::VARY, "Accept"),
        ],
        m.encode_as(format),
    )
        .into_response()
}

/// A run's transcript (`/tasks/ID`), under the status page's token rule.
async fn transcript_page(
    State(state): State<Arc<HttpState>>,
    axum::extract::Path(id): axum::extract::Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = refuse(&state, &headers) {
        return refused;
    }
    let Ok(id) = id.parse::<i64>() else {
        return text(
            StatusCode::NOT_FOUND,
            format!("\"{id}\" is not a run id; the ids are numbers, as `forgehand tasks` lists them\n"),
        );
    };
    let journal = state.journal.clone();
    let page = tokio::task::spawn_blocking(move || {
        crate::transcript::load(&journal, id)
            .map(|run| run.map(|(run, entries)| crate::transcript::render_page(&run, &entries)))
    })
    .await;
    match page {
        Ok(Ok(Some(page))) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            page,
        )
            .into_response(),
        Ok(Ok(None)) => text(
            StatusCode::NOT_FOUND,
            format!("no run {id}: it never was, or it ended longer ago than daemon.transcript_retention\n"),
        ),
        Ok(Err(e)) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot read the journal: {e}\n"),
        ),
        Err(e) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot render the transcript: {e}\n"),
        ),
    }
}

async fn status_page(State(state): State<Arc<HttpState>>, headers: HeaderMap) -> Response {
    if let Some(refused) = refuse(&state, &headers) {
        return refused;
    }
    let ended = match state.journal.ended(50) {
        Ok(e) => e,
        Err(e) => {
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot read the journal: {e}\n"),
            )
        }
    };
    let spend = spend_rows(&state.journal).unwrap_or_else(|e| {
        tracing::warn!("cannot read the spend ledger for the status page: {e}");
        Vec::new()
    });
    let journal = &state.journal;
    let live: Vec<TaskRow<_>> = state
        .board
        .keyed_snapshot()
        .into_iter()
        .map(|(key, task)| TaskRow::of(journal, &key, task))
        .collect();
    let ended: Vec<TaskRow<_>> = ended
        .into_iter()
        .map(|record| TaskRow::of(journal, &record.key.clone(), record))
        .collect();
    let waiting = journal.waiting().unwrap_or_else(|e| {
        tracing::warn!("cannot read the waiting tasks for the status page: {e}");
        Vec::new()
    });
    let page = render_status(
        &state.instance,
        &live,
        &waiting,
        &ended,
        &state.metrics.rate_limits(),
        &spend,
        SystemTime::now(),
    );
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        page,
    )
        .into_response()
}

/// A task's row on the status page, with the run whose transcript
/// (`/tasks/<run>`) it links, when the journal keeps one.
#[derive(Debug, Clone)]
pub struct TaskRow<T> {
    pub task: T,
    pub run: Option<i64>,
}

impl<T> TaskRow<T> {
    /// `task` (of the task `key`) with its newest run.
    fn of(journal: &Journal, key: &str, task: T) -> TaskRow<T> {
        let run = journal.last_run_of(key).unwrap_or_else(|e| {
            tracing::warn!(task = key, "cannot read the task's runs for the status page: {e}");
            None
        });
        TaskRow { task, run }
    }

    /// The row's link to its transcript, or a dash.
    fn transcript_link(&self) -> String {
        match self.run {
            Some(run) => format!("<a href=\"/tasks/{run}\">run {run}</a>"),
            None => "—".into(),
        }
    }
}

/// 182400 as "182,400".
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn ago(seconds: u64) -> String {
    match seconds {
        s if s < 120 => format!("{s} s"),
        s if s < 7200 => format!("{} min", s / 60),
        s if s < 172_800 => format!("{} h", s / 3600),
        s => format!("{} days", s / 86_400),
    }
}

/// The status page: tasks in flight, tasks waiting (holding nothing), the
/// last tasks that ended, and the forges' rate-limit headroom. Plain HTML
/// and a little CSS.
pub fn render_status(
    instance: &str,
    live: &[TaskRow<crate::task::board::LiveTask>],
    waiting: &[crate::journal::Waiting],
    ended: &[TaskRow<crate::journal::TaskRecord>],
    rate_limits: &[(String, i64)],
    spend: &[SpendRow],
    now: SystemTime,
) -> String {
    let mut html = String::new();
    let _ = write!(
        html,
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="refresh" content="30"><title>forgehand · {instance}</title>
<style>
body {{ font: 15px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; padding: 0 1rem; color: #1f2328; }}
h1 {{ font-size: 1.4rem; margin-bottom: .2rem; }} h2 {{ font-size: 1.1rem; margin-top: 2rem; }}
.sub {{ color: #59636e; margin-top: 0; }}
table {{ border-collapse: collapse; width: 100%; }}
th, td {{ text-align: left; padding: .4rem .6rem; border-bottom: 1px solid #d1d9e0; vertical-align: top; }}
th {{ background: #f6f8fa; font-weight: 600; }}
td.num {{ text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }}
td.when {{ white-space: nowrap; }}
.outcome {{ padding: .1rem .45rem; border-radius: .8rem; font-size: .85em; }}
.done {{ background: #dafbe1; }} .failed {{ background: #ffebe9; }} .stopped {{ background: #fff8c5; }}
.empty {{ color: #59636e; font-style: italic; }}
a {{ color: #0969da; }}
</style></head><body>
<h1>forgehand</h1><p class="sub">instance <b>{instance}</b> · refreshed every 30 s</p>
<h2>In flight ({})</h2>
"#,
        live.len(),
        instance = escape(instance),
    );
    if live.is_empty() {
        html.push_str("<p class=\"empty\">No task is running.</p>\n");
    } else {
        html.push_str("<table><tr><th>Task</th><th>Now</th><th>Running for</th><th>Tokens</th><th>Est. cost</th><th>Transcript</th></tr>\n");
        for row in live {
            let t = &row.task;
            let running = now.duration_since(t.started).unwrap_or_default().as_secs();
            let name = if t.web_url.is_empty() {
                escape(&t.name)
            } else {
                format!("<a href=\"{}\">{}</a>", escape(&t.web_url), escape(&t.name))
            };
            let _ = writeln!(
                html,
                "<tr><td>{name}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">${:.4}</td><td>{}</td></tr>",
                escape(&t.status),
                ago(running),
                grouped(t.tokens),
                t.cost,
                row.transcript_link()
            );
        }
        html.push_str("</table>\n");
    }
    render_waiting(&mut html, waiting, now);
    render_ended(&mut html, ended, now);
    html.push_str("<h2>Forge rate limits</h2>\n");
    if rate_limits.is_empty() {
        html.push_str("<p class=\"empty\">No forge has reported its rate limit yet.</p>\n");
    } else {
        html.push_str("<table><tr><th>Forge</th><th>Requests left in the window</th></tr>\n");
        for (forge, left) in rate_limits {
            let _ = writeln!(
                html,
                "<tr><td>{}</td><td class=\"num\">{left}</td></tr>",
                escape(forge)
            );
        }
        html.push_str("</table>\n");
    }
    render_spend(&mut html, spend);
    html.push_str("</body></html>\n");
    html
}

/// The tasks waiting on something outside, holding no slot and no sandbox.
fn render_waiting(html: &mut String, waiting: &[crate::journal::Waiting], now: SystemTime) {
    let _ = writeln!(html, "<h2>Waiting ({})</h2>", waiting.len());
    if waiting.is_empty() {
        html.push_str("<p class=\"empty\">No task is waiting.</p>\n");
        return;
    }
    let now_secs = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    html.push_str("<table><tr><th>Task</th><th>Waiting on</th><th>Since</th></tr>\n");
    for w in waiting {
        let name = crate::forge::ItemRef::parse_key(&w.key)
            .map(|i| i.to_string())
            .unwrap_or_else(|| w.key.clone());
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td class=\"when\">{} ago</td></tr>",
            escape(&name),
            escape(&w.on),
            ago((now_secs - w.since).max(0) as u64)
        );
    }
    html.push_str("</table>\n");
}

/// The tasks that ended last, newest first.
fn render_ended(html: &mut String, ended: &[TaskRow<crate::journal::TaskRecord>], now: SystemTime) {
    let _ = writeln!(html, "<h2>Ended (last {})</h2>", ended.len());
    if ended.is_empty() {
        html.push_str("<p class=\"empty\">No task has ended yet.</p>\n");
    } else {
        html.push_str("<table><tr><th>Task</th><th>Outcome</th><th>PR / MR</th><th>Ended</th><th>Transcript</th></tr>\n");
        let now_secs = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        for row in ended {
            let r = &row.task;
            let name = crate::forge::ItemRef::parse_key(&r.key)
                .map(|i| i.to_string())
                .unwrap_or_else(|| r.key.clone());
            let phase = r.phase.as_str();
            let link = match &r.change_url {
                Some(url) => format!("<a href=\"{}\">{}</a>", escape(url), escape(url)),
                None => "—".into(),
            };
            let outcome: String = r.outcome.as_deref().unwrap_or("").chars().take(160).collect();
            let _ = writeln!(
                html,
                "<tr><td>{}</td><td><span class=\"outcome {phase}\">{phase}</span> {}</td><td>{link}</td><td class=\"when\">{} ago</td><td>{}</td></tr>",
                escape(&name),
                escape(&outcome),
                ago((now_secs - r.updated_at).max(0) as u64),
                row.transcript_link()
            );
        }
        html.push_str("</table>\n");
    }
}

/// What one repository spent on one model: today and this month (UTC).
#[derive(Debug, Clone, PartialEq)]
pub struct SpendRow {
    pub repository: String,
    pub model: String,
    pub today: f64,
    pub month: f64,
}

/// The month's spend by repository and model, from the journal's ledger.
pub fn spend_rows(journal: &crate::journal::Journal) -> Result<Vec<SpendRow>, crate::journal::JournalError> {
    let now = crate::budget::Period::now();
    let today = journal.spend_by_repository(&now.day(), &now.day())?;
    let month = journal.spend_by_repository(&now.month_first_day(), &now.day())?;
    Ok(month
        .into_iter()
        .map(|(repository, model, month)| {
            let today = today
                .iter()
                .find(|(r, m, _)| *r == repository && *m == model)
                .map_or(0.0, |(_, _, usd)| *usd);
            SpendRow {
                repository,
                model,
                today,
                month,
            }
        })
        .collect())
}

fn render_spend(html: &mut String, rows: &[SpendRow]) {
    html.push_str("<h2>Spend (US dollars at the catalogue's prices, UTC)</h2>\n");
    if rows.is_empty() {
        html.push_str("<p class=\"empty\">Nothing spent this month.</p>\n");
        return;
    }
    html.push_str("<table><tr><th>Repository</th><th>Model</th><th>Today</th><th>This month</th></tr>\n");
    for row in rows {
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td class=\"num\">${:.2}</td><td class=\"num\">${:.2}</td></tr>",
            escape(&row.repository),
            escape(&row.model),
            row.today,
            row.month
        );
    }
    html.push_str("</table>\n");
}
