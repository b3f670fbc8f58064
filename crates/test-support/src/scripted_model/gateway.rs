//! One base URL serving OpenAI's two APIs, as gateways do (Azure OpenAI's
//! v1 endpoint, LiteLLM's proxy): the Responses API at `/v1/responses` and
//! Chat Completions at `/v1/chat/completions`, each in its own wire format
//! and with its own rules, both answering from one script. Or a server with
//! Chat Completions only, whose `/v1/responses` answers 404 as the FastAPI
//! servers (vLLM, LiteLLM) answer a path they do not have.

use super::{endpoint, Format, Responder, Script, ScriptedModel};
use serde_json::json;
use std::sync::{Arc, Mutex};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

impl ScriptedModel {
    /// A gateway on one base URL: both APIs when `responses`, else Chat
    /// Completions only. Replies are served in order, whichever API asks.
    pub async fn start_gateway(responses: bool) -> ScriptedModel {
        let server = MockServer::start().await;
        let script = Arc::new(Mutex::new(Script::default()));
        let mut formats = vec![Format::OpenAi];
        if responses {
            formats.push(Format::Responses);
        } else {
            Mock::given(method("POST"))
                .and(path("/v1/responses"))
                .respond_with(ResponseTemplate::new(404).set_body_json(json!({"detail": "Not Found"})))
                .mount(&server)
                .await;
        }
        for format in formats {
            endpoint(format)
                .respond_with(Responder {
                    format,
                    script: script.clone(),
                })
                .mount(&server)
                .await;
        }
        ScriptedModel {
            server,
            format: Format::Responses,
            script,
        }
    }

    /// (path, body as sent) of every request received so far, in order.
    pub async fn calls(&self) -> Vec<(String, String)> {
        self.server
            .received_requests()
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|r| {
                (
                    r.url.path().to_owned(),
                    String::from_utf8_lossy(&r.body).into_owned(),
                )
            })
            .collect()
    }
}
