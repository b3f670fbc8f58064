//! What a transcript keeps of secrets: nothing, in any form, wherever in
//! an entry they are and however long the output around them.

use super::*;
use crate::agent::StepRecorder;
use crate::llm::TokenUsage;

/// forgehand's own secrets, one holding a quote and a backslash, one a
/// PEM key over several lines: both read differently inside JSON.
const QUOTED_KEY: &str = r#"sk-quoted"and\slashed-0123"#;

fn app_key() -> String {
    format!(
        "-----BEGIN RSA PRIVATE KEY-----\n{}\n{}\n-----END RSA PRIVATE KEY-----",
        "MIIEowIBAAKCAQEA1b2c3d4e5f6g7h8i9j0kLmNoPqRsTuVwXyZ0123456789ab",
        "cDeFgHiJkLmNoPqRsTuVwXyZ0123456789abcdefghijklmnopqrstuvwxyzAB"
    )
}

fn installation_token() -> String {
    format!(
        "ghs_{}",
        "Q7wErTy2UiOp4AsDf6GhJk8LzXcV0bNm1234"
            .chars()
            .take(36)
            .collect::<String>()
    )
}

fn transcript() -> (tempfile::TempDir, Arc<Journal>, Arc<Transcript>) {
    let dir = tempfile::tempdir().unwrap();
    let journal = Arc::new(Journal::open(dir.path()).unwrap());
    let key = app_key();
    let secrets = Secrets::from_lookup(&|name| match name {
        "OPENAI_API_KEY" => Some(QUOTED_KEY.to_owned()),
        "GITHUB_APP_PRIVATE_KEY" => Some(key.clone()),
        _ => None,
    });
    let transcript =
        Transcript::begin(journal.clone(), Arc::new(secrets), "github:o/r:issue:1", None).unwrap();
    (dir, journal, transcript)
}

/// Every row the journal holds for the run, as stored.
fn rows(journal: &Journal, transcript: &Transcript) -> String {
    journal
        .entries(transcript.id())
        .unwrap()
        .into_iter()
        .map(|(_, json)| json + "\n")
        .collect()
}

fn command(step: u32, output: &str, arguments: &str) -> (ToolCall, ToolResult) {
    let call = ToolCall {
        id: format!("c{step}"),
        name: "command_executor_execute_command".into(),
        arguments: arguments.into(),
    };
    let result = ToolResult {
        call_id: call.id.clone(),
        name: call.name.clone(),
        content: output.into(),
        is_error: false,
    };
    (call, result)
}

#[test]
fn secrets_that_json_escapes_are_masked_in_every_field() {
    let (_dir, journal, transcript) = transcript();
    let output = format!("exit code 0 (0.1 s)\nkey={QUOTED_KEY}\n{}\n", app_key());
    let arguments = serde_json::json!({"command": format!("echo '{QUOTED_KEY}'")}).to_string();
    let (call, result) = command(1, &output, &arguments);
    transcript.tool_ran(1, &call, &result, Duration::from_millis(5));
    let stored = rows(&journal, &transcript);
    for form in [QUOTED_KEY.to_owned(), app_key()] {
        let escaped = serde_json::to_string(&form).unwrap();
        let escaped = escaped.trim_matches('"');
        assert!(!stored.contains(escaped), "{escaped} in {stored}");
        // Twice escaped: the command inside the call's arguments.
        let twice = serde_json::to_string(escaped).unwrap();
        assert!(!stored.contains(twice.trim_matches('"')), "{stored}");
    }
    assert!(
        !stored.contains("sk-quoted") && !stored.contains("MIIEowIBAAKCAQEA"),
        "{stored}"
    );
    let (_, entries) = load(&journal, transcript.id()).unwrap().unwrap();
    let Entry::Tool {
        output, arguments, ..
    } = &entries[0]
    else {
        panic!("{entries:?}")
    };
    assert!(output.contains("key=***"), "{output}");
    assert!(arguments.contains("***"), "{arguments}");
    assert_eq!(
        entries[1],
        Entry::Note {
            text: "masked in the entry above (by rule, never the value): forgehand-secret".into()
        }
    );
}

#[test]
fn a_token_cut_at_the_fold_is_masked_before_the_middle_is_left_out() {
    let (_dir, journal, transcript) = transcript();
    let token = installation_token();
    // The head keeps 3,000 characters and the tail 3,000: one token
    // straddles each cut, a third sits in the middle that is left out.
    let mut output = "h".repeat(2_990);
    output.push_str(&token);
    output.push('\n');
    output.push_str(&"m".repeat(3_000));
    output.push_str(" glpat-a1B2c3D4e5F6g7H8i9J0 ");
    output.push_str(&"m".repeat(3_000));
    output.push('\n');
    output.push_str(&token);
    output.push('\n');
    output.push_str(&"t".repeat(2_989));
    let (call, result) = command(2, &output, "{}");
    transcript.tool_ran(2, &call, &result, Duration::from_millis(5));
    let stored = rows(&journal, &transcript);
    assert!(!stored.contains(&token[..10]), "the head kept the token's start");
    assert!(
        !stored.contains(&token[token.len() - 10..]),
        "the tail kept the token's end"
    );
    let (_, entries) = load(&journal, transcript.id()).unwrap().unwrap();
    let Entry::Tool {
        output_tail: Some(tail),
        output_chars,
        ..
    } = &entries[0]
    else {
        panic!("{entries:?}")
    };
    assert!(tail.starts_with("app-token]\n"), "{tail}");
    assert_eq!(*output_chars, output.chars().count(), "the output's real size");
    let Entry::Note { text } = &entries[1] else {
        panic!("{entries:?}")
    };
    // Every rule that masked, even the one whose mask was left out.
    assert!(text.ends_with(": github-app-token, gitlab-pat"), "{text}");
}

#[test]
fn an_installation_token_in_an_answer_is_masked_and_said_to_be() {
    let (_dir, journal, transcript) = transcript();
    let token = installation_token();
    let text = format!("I found the token {token} in the environment.");
    let calls = [ToolCall {
        id: "c1".into(),
        name: "command_executor_execute_command".into(),
        arguments: serde_json::json!({"command": format!("curl -H 'Authorization: token {token}' x")})
            .to_string(),
    }];
    transcript.model_turn(&crate::agent::ModelTurn {
        step: 1,
        model: "m",
        text: &text,
        tool_calls: &calls,
        usage: TokenUsage::default(),
        cost: None,
        took: Duration::from_millis(1),
    });
    transcript.note(format!("a note that quotes {token}"));
    let stored = rows(&journal, &transcript);
    assert!(!stored.contains(&token), "{stored}");
    let (_, entries) = load(&journal, transcript.id()).unwrap().unwrap();
    assert_eq!(entries.len(), 4, "{entries:?}");
    let Entry::Model { text, tool_calls, .. } = &entries[0] else {
        panic!("{entries:?}")
    };
    assert_eq!(
        text,
        "I found the token [masked: github-app-token] in the environment."
    );
    assert!(tool_calls[0].arguments.contains("[masked: github-app-token]"));
    assert!(matches!(&entries[1], Entry::Note { text } if text.ends_with(": github-app-token")));
    assert!(matches!(&entries[3], Entry::Note { text } if text.ends_with(": github-app-token")));
}

#[test]
fn entries_without_secrets_are_written_as_they_are() {
    let (_dir, journal, transcript) = transcript();
    transcript.note("started: commit 3f786850e387550fdab836ed7e6dc881de23001b");
    let (_, entries) = load(&journal, transcript.id()).unwrap().unwrap();
    assert_eq!(
        entries,
        vec![Entry::Note {
            text: "started: commit 3f786850e387550fdab836ed7e6dc881de23001b".into()
        }]
    );
}

#[tokio::test]
async fn live_readers_get_each_entry_the_streaming_text_and_the_running_tool_all_masked() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Arc::new(Journal::open(dir.path()).unwrap());
    let secrets = Secrets::from_lookup(&|name| (name == "OPENAI_API_KEY").then(|| QUOTED_KEY.to_owned()));
    let live = Arc::new(LiveRuns::default());
    let transcript = Transcript::begin(
        journal.clone(),
        Arc::new(secrets),
        "github:o/r:issue:1",
        Some(live.clone()),
    )
    .unwrap();
    let mut reader = live.follow(transcript.id()).expect("in flight");
    let leak = format!("the key is {QUOTED_KEY} ");
    transcript.streamed(1, &StreamEvent::Text(leak.clone()));
    let (call, result) = command(
        1,
        "exit code 0 (0.1 s)\n",
        &format!("{{\"command\": \"echo {QUOTED_KEY}\"}}"),
    );
    transcript.tool_started(1, &call);
    transcript.tool_ran(1, &call, &result, Duration::from_millis(3));
    transcript.end("delivered", "");

    let mut events = Vec::new();
    while let Ok(event) = reader.recv().await {
        events.push((*event).clone());
    }
    let json = serde_json::to_string(&events).unwrap();
    assert!(!json.contains("sk-quoted"), "{json}");
    let LiveEvent::Text { step: 1, text } = &events[0] else {
        panic!("{events:?}")
    };
    assert!(text.starts_with("the key is ") && !text.contains("sk-"), "{text}");
    assert!(
        matches!(&events[1], LiveEvent::ToolStarted { step: 1, name, .. } if name == "command_executor_execute_command"),
        "{events:?}"
    );
    let LiveEvent::Entry {
        seq: 0,
        of: "tool",
        html,
        in_step: true,
    } = &events[2]
    else {
        panic!("{events:?}")
    };
    assert!(html.contains("<span class=\"ok\">ok</span>"), "{html}");
    assert!(
        matches!(&events[3], LiveEvent::Entry { seq: 1, of: "note", html, .. } if html.contains("masked in the entry above")),
        "{events:?}"
    );
    assert!(
        matches!(&events[4], LiveEvent::Entry { seq: 2, of: "note", html, .. } if html.contains("ended: delivered")),
        "{events:?}"
    );
    assert_eq!(events.last(), Some(&LiveEvent::Ended));
    assert!(
        live.follow(transcript.id()).is_none(),
        "not in flight after its end"
    );
}

#[test]
fn a_running_runs_page_follows_it_and_an_ended_one_does_not() {
    let mut run = RunRecord {
        id: 9,
        task_key: "github:o/r:issue:1".into(),
        started_at: 0,
        ended_at: None,
        outcome: None,
    };
    let entries = [Entry::Note {
        text: "started".into(),
    }];
    let page = render_page(&run, &entries);
    assert!(page.contains("<main id=\"entries\" data-next=\"1\">"), "{page}");
    assert!(page.contains("new EventSource"), "{page}");
    run.outcome = Some("delivered".into());
    assert!(!render_page(&run, &entries).contains("<script>"));
}
