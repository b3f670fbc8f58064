//! A scripted model server that streams as the providers do, at the pace a
//! test asks for: every event at once, one event every so often (a long
//! answer that keeps streaming), or the first events and then a broken
//! connection, silence, or the provider's error event. Same replies, rules
//! and wire format as [`super::ScriptedModel`]; a real HTTP server on
//! loopback (axum), since a stream that stalls or breaks needs one.

use super::provider_rules::Issued;
use super::{error_answer, model_and_rules, reply_for, sse, Format, Reply};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How a streamed answer is delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Every event at once.
    Whole,
    /// One event, then another after this long, to the end.
    Paced(Duration),
    /// The first `n` events, then the connection breaks.
    CutAfter(usize),
    /// The first `n` events, then nothing more while the connection stays open.
    StallAfter(usize),
    /// The first `n` events, then the provider's error event for an overload.
    ErrorAfter(usize),
}

#[derive(Default)]
struct Script {
    replies: VecDeque<(Reply, Delivery)>,
    answered: usize,
    issued: Issued,
    /// (path, JSON body) of every request.
    requests: Vec<(String, Value)>,
    refused: Vec<(Value, Value)>,
    usages: Vec<Value>,
}

type Shared = (Format, Arc<Mutex<Script>>);

pub struct StreamingModel {
    pub format: Format,
    address: SocketAddr,
    script: Arc<Mutex<Script>>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for StreamingModel {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl StreamingModel {
    pub async fn start(format: Format) -> StreamingModel {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        // Each event goes out when it is written, as a provider flushes it
        // (Nagle's wait against the client's delayed ACK would hold it 40 ms).
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let script = Arc::new(Mutex::new(Script::default()));
        let app = axum::Router::new()
            .fallback(answer)
            .with_state((format, script.clone()));
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        StreamingModel {
            format,
            address,
            script,
            server,
        }
    }

    /// The base URL a provider client is configured with.
    pub fn base_url(&self) -> String {
        match self.format {
            Format::OpenAi | Format::Responses => format!("http://{}/v1", self.address),
            Format::Gemini | Format::Anthropic => format!("http://{}", self.address),
        }
    }

    /// Queues one reply, delivered as `delivery` says.
    pub fn push(&self, reply: Reply, delivery: Delivery) {
        self.script.lock().unwrap().replies.push_back((reply, delivery));
    }

    /// The JSON body of every request so far.
    pub fn requests(&self) -> Vec<Value> {
        self.script
            .lock()
            .unwrap()
            .requests
            .iter()
            .map(|(_, b)| b.clone())
            .collect()
    }

    /// The paths of every request so far.
    pub fn paths(&self) -> Vec<String> {
        self.script
            .lock()
            .unwrap()
            .requests
            .iter()
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// The requests refused (by the provider's rules, or unknown), with why.
    pub fn refused(&self) -> Vec<(Value, Value)> {
        self.script.lock().unwrap().refused.clone()
    }

    /// The usage object of every answer, as sent.
    pub fn usages(&self) -> Vec<Value> {
        self.script.lock().unwrap().usages.clone()
    }
}

/// Whether `path` is `format`'s endpoint.
fn serves(format: Format, path: &str) -> bool {
    match format {
        Format::OpenAi => path == "/v1/chat/completions",
        Format::Responses => path == "/v1/responses",
        Format::Anthropic => path == "/v1/messages",
        Format::Gemini => {
            path.starts_with("/v1beta/models/")
                && (path.ends_with(":generateContent") || path.ends_with(":streamGenerateContent"))
        }
    }
}

fn json_answer(status: u16, body: &Value) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

async fn answer(State((format, script)): State<Shared>, method: Method, uri: Uri, body: Bytes) -> Response {
    let path = uri.path().to_owned();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut script = script.lock().unwrap();
    script.requests.push((path.clone(), body.clone()));
    if method != Method::POST || !serves(format, &path) {
        let error = json!({"error": {"message": format!("no route {method} {path}")}});
        script.refused.push((body, error.clone()));
        return json_answer(404, &error);
    }
    let (model, checked) = model_and_rules(format, &path, &body, &script.issued);
    if let Err(error) = checked {
        script.refused.push((body, error.clone()));
        return json_answer(400, &error);
    }
    let Some((reply, delivery)) = script.replies.pop_front() else {
        return json_answer(
            500,
            &json!({"error": {"message": "the test queued no more replies"}}),
        );
    };
    if let Some((status, error, _)) = error_answer(format, &reply) {
        return json_answer(status, &error);
    }
    let n = script.answered;
    script.answered += 1;
    let whole = match reply_for(format, &model, &body, reply, n, &mut script.issued) {
        Ok(whole) => whole,
        Err(error) => {
            script.refused.push((body, error.clone()));
            return json_answer(400, &error);
        }
    };
    script.usages.push(match format {
        Format::Gemini => whole["usageMetadata"].clone(),
        _ => whole["usage"].clone(),
    });
    if !sse::asks_to_stream(format, &path, &body) {
        return json_answer(200, &whole);
    }
    if format == Format::Gemini && uri.query() != Some("alt=sse") {
        return json_answer(200, &sse::gemini_array(&whole));
    }
    let frames = sse::frames(format, &body, &whole);
    let body = Body::from_stream(deliver(format, frames, delivery));
    ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
}

type Chunk = Result<Bytes, std::io::Error>;

/// The events as `delivery` sends them.
fn deliver(
    format: Format,
    frames: Vec<sse::Frame>,
    delivery: Delivery,
) -> futures_util::stream::BoxStream<'static, Chunk> {
    let bytes = move |frame: &sse::Frame| -> Chunk { Ok(Bytes::from(frame.encode(format))) };
    let first = |n: usize| futures_util::stream::iter(frames.iter().take(n).map(bytes).collect::<Vec<_>>());
    match delivery {
        Delivery::Whole => first(frames.len()).boxed(),
        Delivery::Paced(every) => futures_util::stream::iter(frames.iter().map(bytes).collect::<Vec<_>>())
            .enumerate()
            .then(move |(i, chunk)| async move {
                if i > 0 {
                    tokio::time::sleep(every).await;
                }
                chunk
            })
            .boxed(),
        // The events sent go out before the connection breaks.
        Delivery::CutAfter(n) => first(n)
            .chain(futures_util::stream::once(async {
                tokio::time::sleep(Duration::from_millis(50)).await;
                Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionReset,
                    "the model server went away",
                ))
            }))
            .boxed(),
        Delivery::StallAfter(n) => first(n).chain(futures_util::stream::pending()).boxed(),
        Delivery::ErrorAfter(n) => {
            let error = bytes(&sse::overload_frame(format));
            first(n).chain(futures_util::stream::iter([error])).boxed()
        }
    }
}
