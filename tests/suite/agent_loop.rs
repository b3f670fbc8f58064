//! The tool-calling loop with a fake model and fake tools: answers, every
//! cap, malformed calls, and which tools the model is offered.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use async_trait::async_trait;
use forgehand::agent::tools::{CommandExecutor, ServerTools, ToolRegistry};
use forgehand::agent::{Agent, AgentLimits, ChatModel, StopReason};
use forgehand::llm::{ChatRequest, ChatResponse, FinishReason, LlmError, Message, TokenUsage, ToolCall};
use forgehand::mcp::{McpClient, McpError, ToolInfo, ToolOutput};
use forgehand::sandbox::ExecOutput;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

// --- fakes ---------------------------------------------------------------

enum Step {
    Calls(Vec<(&'static str, String)>),
    Text(&'static str),
    Fail,
    /// An answer that stops for a reason: (text, why).
    Stopped(&'static str, FinishReason),
}

struct FakeModel {
    script: Mutex<VecDeque<Step>>,
    /// Used when the script runs out: keep calling this tool.
    forever: Option<(&'static str, String)>,
    usage: TokenUsage,
    delay: Duration,
    requests: Mutex<Vec<ChatRequest>>,
}

impl FakeModel {
    fn new(script: Vec<Step>) -> FakeModel {
        FakeModel {
            script: Mutex::new(script.into()),
            forever: None,
            usage: TokenUsage {
                input_tokens: 10,
                cached_input_tokens: 0,
                output_tokens: 5,
                ..Default::default()
            },
            delay: Duration::ZERO,
            requests: Mutex::new(Vec::new()),
        }
    }
}

#[async_trait]
impl ChatModel for FakeModel {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.requests.lock().unwrap().push(request.clone());
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        let step = self.script.lock().unwrap().pop_front();
        let step = match step {
            Some(step) => step,
            None => match &self.forever {
                Some((name, args)) => Step::Calls(vec![(name, args.clone())]),
                None => Step::Text("out of script"),
            },
        };
        let n = self.requests.lock().unwrap().len();
        if let Step::Stopped(text, finish) = step {
            return Ok(ChatResponse {
                text: text.into(),
                usage: self.usage,
                model: "fake-model".into(),
                finish,
                ..Default::default()
            });
        }
        let (text, tool_calls) = match step {
            Step::Text(t) => (t.to_owned(), vec![]),
            Step::Calls(calls) => (
                String::new(),
                calls
                    .into_iter()
                    .enumerate()
                    .map(|(i, (name, arguments))| ToolCall {
                        id: format!("c{n}-{i}"),
                        name: name.into(),
                        arguments,
                    })
                    .collect(),
            ),
            Step::Stopped(..) => unreachable!(),
            Step::Fail => {
                return Err(LlmError::Rejected {
                    provider: "fake".into(),
                    status: 400,
                    message: "bad request".into(),
                })
            }
        };
        Ok(ChatResponse {
            text,
            tool_calls,
            usage: self.usage,
            model: "fake-model".into(),
            ..Default::default()
        })
    }
}

struct FakeServer {
    name: String,
    tools: Vec<&'static str>,
    reply: ToolOutput,
    calls: Mutex<Vec<(String, Map<String, Value>)>>,
}

impl FakeServer {
    fn new(name: &str, tools: Vec<&'static str>, reply: ToolOutput) -> Arc<FakeServer> {
        Arc::new(FakeServer {
            name: name.into(),
            tools,
            reply,
            calls: Mutex::new(Vec::new()),
        })
    }
}

#[async_trait]
impl McpClient for FakeServer {
    fn server_name(&self) -> &str {
        &self.name
    }
    async fn list_tools(&self) -> Result<Vec<ToolInfo>, McpError> {
        Ok(self
            .tools
            .iter()
            .map(|t| ToolInfo {
                name: t.to_string(),
                description: format!("{t} tool"),
                input_schema: json!({"type": "object"}).as_object().unwrap().clone(),
            })
            .collect())
    }
    async fn call_tool(&self, name: &str, arguments: Map<String, Value>) -> Result<ToolOutput, McpError> {
        self.calls.lock().unwrap().push((name.into(), arguments));
        Ok(self.reply.clone())
    }
}

struct FakeExecutor {
    stdout: String,
}

#[async_trait]
impl CommandExecutor for FakeExecutor {
    async fn execute(&self, command: &str, _timeout: Option<Duration>) -> Result<ExecOutput, String> {
        Ok(ExecOutput {
            exit_code: Some(if command == "false" { 1 } else { 0 }),
            stdout: self.stdout.clone(),
            stderr: String::new(),
            duration: Duration::from_millis(5),
            timed_out: false,
            stdout_truncated: false,
            stderr_truncated: false,
        })
    }
}

fn ok(text: &str) -> ToolOutput {
    ToolOutput {
        text: text.into(),
        is_error: false,
    }
}

async fn registry(editor: Option<Arc<FakeServer>>, stdout: &str, servers: Vec<ServerTools>) -> ToolRegistry {
    let executor: Arc<dyn CommandExecutor> = Arc::new(FakeExecutor {
        stdout: stdout.into(),
    });
    ToolRegistry::build(editor.map(|e| e as Arc<dyn McpClient>), Some(executor), servers)
        .await
        .unwrap()
}

fn editor(reply: ToolOutput) -> Arc<FakeServer> {
    FakeServer::new("text-editor", vec!["text_editor"], reply)
}

fn agent(model: Arc<FakeModel>, tools: ToolRegistry, limits: AgentLimits) -> Agent {
    Agent::new(model, tools, limits, BTreeMap::new())
}

fn user(text: &str) -> Vec<Message> {
    vec![Message::User(text.into())]
}

fn results_of(messages: &[Message]) -> Vec<(String, String, bool)> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::ToolResults(r) => Some(
                r.iter()
                    .map(|r| (r.name.clone(), r.content.clone(), r.is_error))
                    .collect::<Vec<_>>(),
            ),
            _ => None,
        })
        .flatten()
        .collect()
}

// --- tests ---------------------------------------------------------------

#[tokio::test]
async fn tool_calls_run_in_order_until_the_model_answers() {
    let editor = editor(ok("     1\thello"));
    let model = Arc::new(FakeModel::new(vec![
        Step::Calls(vec![(
            "text_editor_view",
            json!({"path": "/workspace/project/a.txt"}).to_string(),
        )]),
        Step::Calls(vec![(
            "command_executor_execute_command",
            json!({"command": "ls"}).to_string(),
        )]),
        Step::Text("All done."),
    ]));
    let agent = agent(
        model.clone(),
        registry(Some(editor.clone()), "a.txt\n", vec![]).await,
        AgentLimits::default(),
    );
    let outcome = agent.run("system", user("look around")).await;
    assert_eq!(outcome.stop, StopReason::Answered);
    assert_eq!(outcome.answer.as_deref(), Some("All done."));
    assert_eq!((outcome.steps, outcome.tool_calls), (3, 2));
    let calls = editor.calls.lock().unwrap().clone();
    assert_eq!(
        calls,
        vec![(
            "text_editor".to_owned(),
            json!({"command": "view", "path": "/workspace/project/a.txt"})
                .as_object()
                .unwrap()
                .clone()
        )]
    );
    let results = results_of(&outcome.messages);
    assert_eq!(
        results[0],
        ("text_editor_view".into(), "     1\thello".into(), false)
    );
    assert!(
        results[1].1.starts_with("exit code 0") && results[1].1.contains("a.txt"),
        "{:?}",
        results[1]
    );
    assert_eq!(
        outcome.usage.total(),
        TokenUsage {
            input_tokens: 30,
            cached_input_tokens: 0,
            output_tokens: 15,
            ..Default::default()
        }
    );
    // The model saw the system prompt and every tool each time.
    let requests = model.requests.lock().unwrap();
    assert_eq!(requests[0].system, "system");
    assert_eq!(requests[2].messages.len(), 5);
}

#[tokio::test]
async fn malformed_arguments_and_unknown_tools_are_told_to_the_model() {
    let editor = editor(ok("fine"));
    let model = Arc::new(FakeModel::new(vec![
        Step::Calls(vec![
            ("text_editor_view", "{\"path\": \"/workspace/project/a\"".into()),
            ("text_editor_view", "[1, 2]".into()),
            (
                "text_editor_str_replace",
                json!({"path": "/workspace/project/a"}).to_string(),
            ),
            ("delete_everything", "{}".into()),
        ]),
        Step::Text("ok"),
    ]));
    let agent = agent(
        model,
        registry(Some(editor.clone()), "", vec![]).await,
        AgentLimits::default(),
    );
    let outcome = agent.run("system", user("go")).await;
    assert_eq!(outcome.stop, StopReason::Answered);
    let results = results_of(&outcome.messages);
    assert!(results.iter().all(|(_, _, error)| *error), "{results:?}");
    assert!(results[0].1.contains("not valid JSON"), "{}", results[0].1);
    assert!(results[1].1.contains("must be a JSON object"), "{}", results[1].1);
    assert!(
        results[2].1.contains("Missing required argument(s): old_str"),
        "{}",
        results[2].1
    );
    assert!(
        results[3].1.contains("Unknown tool `delete_everything`")
            && results[3].1.contains("text_editor_view"),
        "{}",
        results[3].1
    );
    assert!(
        editor.calls.lock().unwrap().is_empty(),
        "no malformed call reaches a tool"
    );
}

#[tokio::test]
async fn max_steps_stops_a_model_that_never_answers() {
    let mut model = FakeModel::new(vec![]);
    model.forever = Some((
        "command_executor_execute_command",
        json!({"command": "true"}).to_string(),
    ));
    let limits = AgentLimits {
        max_steps: 4,
        ..AgentLimits::default()
    };
    let outcome = agent(Arc::new(model), registry(None, "", vec![]).await, limits)
        .run("s", user("go"))
        .await;
    assert_eq!(outcome.stop, StopReason::MaxSteps { limit: 4 });
    assert_eq!(outcome.steps, 4);
    assert!(outcome.answer.is_none());
    assert!(outcome.stop.to_string().contains("agent.max_steps"));
}

#[tokio::test]
async fn the_token_budget_stops_the_run() {
    let mut model = FakeModel::new(vec![]);
    model.forever = Some((
        "command_executor_execute_command",
        json!({"command": "true"}).to_string(),
    ));
    model.usage = TokenUsage {
        input_tokens: 500,
        cached_input_tokens: 0,
        output_tokens: 100,
        ..Default::default()
    };
    let limits = AgentLimits {
        token_budget: 1000,
        ..AgentLimits::default()
    };
    let outcome = agent(Arc::new(model), registry(None, "", vec![]).await, limits)
        .run("s", user("go"))
        .await;
    assert_eq!(
        outcome.stop,
        StopReason::TokenBudget {
            used: 1200,
            limit: 1000
        }
    );
    assert_eq!(outcome.steps, 2);
}

#[tokio::test(start_paused = true)]
async fn the_wall_clock_limit_stops_a_slow_run() {
    let mut model = FakeModel::new(vec![]);
    model.forever = Some((
        "command_executor_execute_command",
        json!({"command": "true"}).to_string(),
    ));
    model.delay = Duration::from_secs(600);
    let limits = AgentLimits {
        wall_clock: Duration::from_secs(1500),
        ..AgentLimits::default()
    };
    let outcome = agent(Arc::new(model), registry(None, "", vec![]).await, limits)
        .run("s", user("go"))
        .await;
    assert_eq!(
        outcome.stop,
        StopReason::WallClock {
            limit: Duration::from_secs(1500)
        }
    );
    assert_eq!(outcome.steps, 3, "the third request is cut short by the limit");
}

#[tokio::test]
async fn the_same_failing_call_is_warned_about_then_stopped() {
    let editor = editor(ToolOutput {
        text: "No replacement was performed".into(),
        is_error: true,
    });
    let mut model = FakeModel::new(vec![]);
    model.forever = Some((
        "text_editor_str_replace",
        json!({"path": "/workspace/project/a", "old_str": "x", "new_str": "y"}).to_string(),
    ));
    let outcome = agent(
        Arc::new(model),
        registry(Some(editor), "", vec![]).await,
        AgentLimits::default(),
    )
    .run("s", user("go"))
    .await;
    assert_eq!(
        outcome.stop,
        StopReason::RepeatedFailure {
            tool: "text_editor_str_replace".into(),
            times: 3
        }
    );
    let results = results_of(&outcome.messages);
    assert_eq!(results.len(), 3);
    assert!(!results[0].1.contains("[forgehand"));
    assert!(
        results[1].1.contains("has now failed 2 times") && results[1].1.contains("Do something different"),
        "{}",
        results[1].1
    );
}

#[tokio::test]
async fn a_flood_of_tool_calls_is_bounded_per_turn() {
    let calls: Vec<(&'static str, String)> = (0..20)
        .map(|i| {
            (
                "command_executor_execute_command",
                json!({"command": format!("echo {i}")}).to_string(),
            )
        })
        .collect();
    let model = Arc::new(FakeModel::new(vec![Step::Calls(calls), Step::Text("done")]));
    let limits = AgentLimits {
        max_tool_calls_per_step: 5,
        ..AgentLimits::default()
    };
    let outcome = agent(model, registry(None, "", vec![]).await, limits)
        .run("s", user("go"))
        .await;
    assert_eq!(outcome.tool_calls, 5);
    let results = results_of(&outcome.messages);
    assert_eq!(results.len(), 20, "every call gets a result");
    assert!(results[5..]
        .iter()
        .all(|(_, text, error)| *error && text.contains("at most 5 tool calls")));
}

#[tokio::test]
async fn long_results_are_cut_with_a_marker() {
    let model = Arc::new(FakeModel::new(vec![
        Step::Calls(vec![(
            "command_executor_execute_command",
            json!({"command": "cat big"}).to_string(),
        )]),
        Step::Text("done"),
    ]));
    let limits = AgentLimits {
        max_tool_result_bytes: 1024,
        ..AgentLimits::default()
    };
    let outcome = agent(model, registry(None, &"x".repeat(100_000), vec![]).await, limits)
        .run("s", user("go"))
        .await;
    let results = results_of(&outcome.messages);
    assert!(
        results[0].1.len() < 1300 && results[0].1.contains("result cut at 1024"),
        "{}",
        results[0].1.len()
    );
}

#[tokio::test]
async fn a_model_error_ends_the_run_with_its_reason() {
    let model = Arc::new(FakeModel::new(vec![Step::Fail]));
    let outcome = agent(model, registry(None, "", vec![]).await, AgentLimits::default())
        .run("s", user("go"))
        .await;
    assert!(
        matches!(&outcome.stop, StopReason::Model(e) if e.contains("bad request")),
        "{:?}",
        outcome.stop
    );
}

#[tokio::test]
async fn a_tool_call_the_provider_could_not_parse_is_asked_for_again_saying_what_was_wrong() {
    let model = Arc::new(FakeModel::new(vec![
        Step::Stopped(
            "",
            FinishReason::MalformedToolCall("MALFORMED_FUNCTION_CALL: bad args".into()),
        ),
        Step::Calls(vec![(
            "text_editor_view",
            r#"{"path": "/workspace/project/a"}"#.into(),
        )]),
        Step::Text("done"),
    ]));
    let outcome = agent(
        model.clone(),
        registry(Some(editor(ok("x"))), "", vec![]).await,
        AgentLimits::default(),
    )
    .run("s", user("go"))
    .await;
    assert_eq!(
        (outcome.stop, outcome.answer.as_deref()),
        (StopReason::Answered, Some("done"))
    );
    let second = model.requests.lock().unwrap()[1].clone();
    assert!(
        matches!(second.messages.last(), Some(Message::User(t)) if t.contains("could not be read") && t.contains("MALFORMED_FUNCTION_CALL")),
        "{:?}",
        second.messages
    );
    // No empty assistant turn was kept for the malformed answer.
    assert!(!second.messages.iter().any(|m| matches!(m, Message::Assistant { text, tool_calls, .. } if text.is_empty() && tool_calls.is_empty())));

    // Malformed again and again: stopped, saying so.
    let model = Arc::new(FakeModel::new(
        (0..5)
            .map(|_| {
                Step::Stopped(
                    "",
                    FinishReason::MalformedToolCall("MALFORMED_FUNCTION_CALL".into()),
                )
            })
            .collect(),
    ));
    let outcome = agent(model, registry(None, "", vec![]).await, AgentLimits::default())
        .run("s", user("go"))
        .await;
    assert!(
        matches!(outcome.stop, StopReason::RepeatedFailure { times: 3, .. }),
        "{:?}",
        outcome.stop
    );
}

#[tokio::test]
async fn an_answer_cut_at_the_output_limit_gets_more_room_and_a_cut_text_is_continued() {
    let model = Arc::new(FakeModel::new(vec![
        // Thinking ate the whole room: nothing to keep, ask again with more.
        Step::Stopped("", FinishReason::OutputLimit),
        Step::Stopped("The change is in a.rs and ", FinishReason::OutputLimit),
        Step::Text("b.rs."),
    ]));
    let limits = AgentLimits {
        max_output_tokens: 1000,
        ..AgentLimits::default()
    };
    let outcome = agent(model.clone(), registry(None, "", vec![]).await, limits)
        .run("s", user("go"))
        .await;
    assert_eq!(outcome.stop, StopReason::Answered);
    assert_eq!(outcome.answer.as_deref(), Some("The change is in a.rs and b.rs."));
    let requests = model.requests.lock().unwrap().clone();
    let rooms: Vec<u32> = requests.iter().map(|r| r.max_output_tokens).collect();
    assert_eq!(rooms, [1000, 2000, 4000]);
    assert!(
        matches!(requests[2].messages.last(), Some(Message::User(t)) if t.contains("cut at the output limit"))
    );

    let model = Arc::new(FakeModel::new(
        (0..5)
            .map(|_| Step::Stopped("", FinishReason::OutputLimit))
            .collect(),
    ));
    let outcome = agent(model, registry(None, "", vec![]).await, AgentLimits::default())
        .run("s", user("go"))
        .await;
    assert!(
        matches!(outcome.stop, StopReason::OutputLimit { times: 3 }),
        "{:?}",
        outcome.stop
    );
    assert!(
        outcome.stop.to_string().contains("output limit"),
        "{}",
        outcome.stop
    );
}

#[tokio::test]
async fn a_refusal_stops_the_run_in_plain_words() {
    let model = Arc::new(FakeModel::new(vec![Step::Stopped(
        "",
        FinishReason::Refused("Gemini withheld the answer (SAFETY)".into()),
    )]));
    let outcome = agent(model, registry(None, "", vec![]).await, AgentLimits::default())
        .run("s", user("go"))
        .await;
    assert_eq!(
        outcome.stop,
        StopReason::Refused("Gemini withheld the answer (SAFETY)".into())
    );
    assert_eq!(
        outcome.stop.to_string(),
        "stopped: the model declined to continue (Gemini withheld the answer (SAFETY))"
    );
    assert_eq!(outcome.answer, None);
}

#[tokio::test]
async fn platform_tools_are_hidden_only_while_the_editor_is_enabled() {
    let servers = || {
        vec![
            ServerTools {
                client: FakeServer::new("github", vec!["create_or_update_file", "create_issue"], ok("")),
                allowed_tools: None,
                excluded_tools: vec![],
            },
            ServerTools {
                client: FakeServer::new("docs", vec!["search", "delete", "admin"], ok("")),
                allowed_tools: Some(vec!["search".into(), "delete".into()]),
                excluded_tools: vec!["delete".into()],
            },
        ]
    };
    let names = |r: &ToolRegistry| r.specs().iter().map(|s| s.name.clone()).collect::<Vec<_>>();

    let with_editor = registry(Some(editor(ok(""))), "", servers()).await;
    assert_eq!(
        names(&with_editor),
        vec![
            "text_editor_view",
            "text_editor_create",
            "text_editor_str_replace",
            "text_editor_insert",
            "text_editor_undo_edit",
            "command_executor_execute_command",
            "docs__search"
        ]
    );
    let without_editor = registry(None, "", servers()).await;
    assert_eq!(
        names(&without_editor),
        vec![
            "command_executor_execute_command",
            "github__create_or_update_file",
            "github__create_issue",
            "docs__search"
        ]
    );

    // Each editor function carries only its own parameters.
    let spec = |name: &str| {
        with_editor
            .specs()
            .iter()
            .find(|s| s.name == name)
            .unwrap()
            .parameters
            .clone()
    };
    let params = |name: &str| {
        spec(name)["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(params("text_editor_view"), vec!["path", "view_range"]);
    assert_eq!(params("text_editor_undo_edit"), vec!["path"]);
    assert_eq!(
        spec("text_editor_insert")["required"],
        json!(["path", "insert_line", "new_str"])
    );
}

#[tokio::test]
async fn server_tools_are_routed_by_their_exposed_name() {
    let docs = FakeServer::new("docs", vec!["search"], ok("found it"));
    let servers = vec![ServerTools {
        client: docs.clone(),
        allowed_tools: None,
        excluded_tools: vec![],
    }];
    let model = Arc::new(FakeModel::new(vec![
        Step::Calls(vec![("docs__search", json!({"q": "tokio"}).to_string())]),
        Step::Text("done"),
    ]));
    let outcome = agent(model, registry(None, "", servers).await, AgentLimits::default())
        .run("s", user("go"))
        .await;
    assert_eq!(
        results_of(&outcome.messages)[0],
        ("docs__search".into(), "found it".into(), false)
    );
    assert_eq!(docs.calls.lock().unwrap()[0].0, "search");
}

#[tokio::test]
async fn the_first_turn_goes_out_while_the_sandbox_is_prepared_and_tools_wait_for_it() {
    use futures_util::FutureExt;
    let editor = editor(ok("     1\thello"));
    let model = Arc::new(FakeModel::new(vec![
        Step::Calls(vec![(
            "text_editor_view",
            json!({"path": "/workspace/project/a.txt"}).to_string(),
        )]),
        Step::Text("done"),
    ]));
    let (prepared, ready) = tokio::sync::oneshot::channel::<()>();
    let readiness = async move { ready.await.map_err(|_| "dropped".to_owned()) }
        .boxed()
        .shared();
    let agent = agent(
        model.clone(),
        registry(Some(editor.clone()), "", vec![]).await,
        AgentLimits::default(),
    )
    .with_ready(Some(readiness));
    let run = tokio::spawn(async move { agent.run("s", user("go")).await });
    // The model is asked at once, but its tool call waits for the sandbox.
    while model.requests.lock().unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        editor.calls.lock().unwrap().is_empty(),
        "no tool before the sandbox is ready"
    );
    assert_eq!(model.requests.lock().unwrap().len(), 1);
    prepared.send(()).unwrap();
    let outcome = run.await.unwrap();
    assert_eq!(outcome.stop, StopReason::Answered);
    assert_eq!(editor.calls.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_sandbox_that_could_not_be_prepared_stops_the_run_before_any_tool() {
    use futures_util::FutureExt;
    let editor = editor(ok("fine"));
    let model = Arc::new(FakeModel::new(vec![Step::Calls(vec![(
        "text_editor_view",
        json!({"path": "/workspace/project/a.txt"}).to_string(),
    )])]));
    let readiness = async { Err("the snapshot's archive is damaged".to_owned()) }
        .boxed()
        .shared();
    let outcome = agent(
        model.clone(),
        registry(Some(editor.clone()), "", vec![]).await,
        AgentLimits::default(),
    )
    .with_ready(Some(readiness))
    .run("s", user("go"))
    .await;
    assert_eq!(
        outcome.stop,
        StopReason::NotReady("the snapshot's archive is damaged".into())
    );
    assert!(outcome.stop.to_string().contains("damaged"), "{}", outcome.stop);
    assert!(editor.calls.lock().unwrap().is_empty());
    assert_eq!(outcome.tool_calls, 0);
}

#[tokio::test]
async fn a_model_that_answers_at_once_never_waits_for_the_sandbox() {
    let model = Arc::new(FakeModel::new(vec![Step::Text("Nothing to change.")]));
    let outcome = agent(model, registry(None, "", vec![]).await, AgentLimits::default())
        .with_ready(Some(futures_util::future::FutureExt::shared(
            Box::pin(futures_util::future::pending::<Result<(), String>>())
                as futures_util::future::BoxFuture<'static, _>,
        )))
        .run("s", user("go"))
        .await;
    assert_eq!(outcome.stop, StopReason::Answered);
}

/// Keeps each step boundary it is told of: (step, tool calls, messages).
#[derive(Default)]
struct KeptSteps(Mutex<Vec<(u32, u32, Vec<Message>)>>);

#[async_trait]
impl forgehand::agent::Checkpointer for KeptSteps {
    async fn step_done(&self, point: &forgehand::agent::StepPoint<'_>) {
        self.0
            .lock()
            .unwrap()
            .push((point.step, point.tool_calls, point.messages.to_vec()));
    }
}

#[tokio::test]
async fn every_step_boundary_is_kept_and_a_run_resumed_from_one_goes_on_from_there() {
    let call = |command: &str| {
        (
            "command_executor_execute_command",
            json!({ "command": command }).to_string(),
        )
    };
    let model = Arc::new(FakeModel::new(vec![
        Step::Calls(vec![call("echo one")]),
        Step::Calls(vec![call("echo two"), call("echo three")]),
        Step::Text("Done."),
    ]));
    let kept = Arc::new(KeptSteps::default());
    let mut first = agent(
        model.clone(),
        registry(None, "ok\n", vec![]).await,
        AgentLimits::default(),
    );
    first.set_checkpointer(Some(kept.clone()));
    let whole = first.run("system", user("count")).await;
    assert_eq!(whole.stop, StopReason::Answered);
    // Told after each step that ran tools, with the results last; not
    // after the answer.
    let boundaries = kept.0.lock().unwrap().clone();
    let shape: Vec<(u32, u32, usize)> = boundaries.iter().map(|(s, c, m)| (*s, *c, m.len())).collect();
    assert_eq!(shape, vec![(1, 1, 3), (2, 3, 5)]);
    assert!(matches!(boundaries[1].2.last(), Some(Message::ToolResults(r)) if r.len() == 2));

    // A run started again from the first boundary asks the model for step
    // 2 with the conversation as it was, and counts on from it.
    let (step, tool_calls, messages) = boundaries[0].clone();
    let again = Arc::new(FakeModel::new(vec![
        Step::Calls(vec![call("echo two")]),
        Step::Text("Done."),
    ]));
    let resumed = agent(
        again.clone(),
        registry(None, "ok\n", vec![]).await,
        AgentLimits::default(),
    )
    .run_from(
        "system",
        forgehand::agent::Start {
            messages: messages.clone(),
            steps: step,
            tool_calls,
        },
    )
    .await;
    assert_eq!(resumed.stop, StopReason::Answered);
    assert_eq!((resumed.steps, resumed.tool_calls), (3, 2));
    let asked = again.requests.lock().unwrap().clone();
    assert_eq!(asked.len(), 2, "only the steps after the boundary are asked for");
    assert_eq!(asked[0].messages, messages);

    // The step cap counts the steps made before the resume.
    let limits = AgentLimits {
        max_steps: 2,
        ..AgentLimits::default()
    };
    let mut capped = FakeModel::new(vec![]);
    capped.forever = Some(call("true"));
    let start = forgehand::agent::Start {
        messages,
        steps: step,
        tool_calls,
    };
    let stopped = agent(Arc::new(capped), registry(None, "", vec![]).await, limits)
        .run_from("system", start)
        .await;
    assert_eq!(stopped.stop, StopReason::MaxSteps { limit: 2 });
    assert_eq!(stopped.steps, 2);
}
