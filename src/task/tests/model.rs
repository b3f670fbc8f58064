//! A model that answers from a script: classifications with a label, the
//! agent's turns in order (a command to run, or a final answer).

use crate::agent::tools::EXECUTE_COMMAND;
use crate::agent::ChatModel;
use crate::llm::{ChatRequest, ChatResponse, LlmError, Message, TokenUsage, ToolCall};
use async_trait::async_trait;
use std::collections::VecDeque;
use std::sync::Mutex;

/// One answer of the agent's model.
pub enum Turn {
    Command(String),
    Answer(String),
}

impl Turn {
    pub fn command(command: &str) -> Turn {
        Turn::Command(command.to_owned())
    }

    pub fn answer(text: &str) -> Turn {
        Turn::Answer(text.to_owned())
    }
}

pub struct Scripted {
    turns: Mutex<VecDeque<Turn>>,
    /// The newest user message of each agent request, in order.
    agent: Mutex<Vec<String>>,
    /// How many messages each of those requests held.
    lengths: Mutex<Vec<usize>>,
    classifications: Mutex<usize>,
}

impl Scripted {
    pub fn new(turns: Vec<Turn>) -> Scripted {
        Scripted {
            turns: Mutex::new(turns.into()),
            agent: Mutex::default(),
            lengths: Mutex::default(),
            classifications: Mutex::default(),
        }
    }

    pub fn classifications(&self) -> usize {
        *self.classifications.lock().unwrap()
    }

    pub fn agent_requests(&self) -> Vec<String> {
        self.agent.lock().unwrap().clone()
    }

    /// How many messages each agent request with a new user message held.
    pub fn agent_request_lengths(&self) -> Vec<usize> {
        self.lengths.lock().unwrap().clone()
    }
}

fn response(text: &str, tool_calls: Vec<ToolCall>) -> ChatResponse {
    ChatResponse {
        text: text.to_owned(),
        tool_calls,
        usage: TokenUsage {
            input_tokens: 100,
            output_tokens: 10,
            ..TokenUsage::default()
        },
        model: "scripted".into(),
        finish: Default::default(),
        native: None,
    }
}

#[async_trait]
impl ChatModel for Scripted {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        if request.tools.is_empty() {
            if request.json_output {
                *self.classifications.lock().unwrap() += 1;
                return Ok(response(
                    r#"{"intent": ["PROBLEM_DEFINITION"], "reason": "the request"}"#,
                    Vec::new(),
                ));
            }
            return Ok(response("A summary.", Vec::new()));
        }
        let newest = request
            .messages
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::User(text) => Some(text.clone()),
                _ => None,
            })
            .unwrap_or_default();
        let fresh = matches!(request.messages.last(), Some(Message::User(_)));
        if fresh {
            self.agent.lock().unwrap().push(newest);
            self.lengths.lock().unwrap().push(request.messages.len());
        }
        let turn = self.turns.lock().unwrap().pop_front();
        Ok(match turn {
            Some(Turn::Command(command)) => response(
                "",
                vec![ToolCall {
                    id: format!("call-{}", self.agent.lock().unwrap().len()),
                    name: EXECUTE_COMMAND.into(),
                    arguments: serde_json::json!({ "command": command }).to_string(),
                }],
            ),
            Some(Turn::Answer(text)) => response(&text, Vec::new()),
            None => response("Nothing more to do.", Vec::new()),
        })
    }
}
