//! The editor server as an MCP client meets it: JSON-RPC over the stdio of
//! the real executable (the static build that goes into sandboxes), every
//! line of stdout a protocol message.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support as common;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Server {
    fn spawn(program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Server {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Server {
            child,
            stdin,
            stdout,
            next_id: 1,
        }
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request and returns its result; every line read must be JSON-RPC.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let answer = self.answer(method, params);
        assert!(answer.get("error").is_none(), "{method} failed: {answer}");
        answer["result"].clone()
    }

    /// Sends a request that must fail and returns its JSON-RPC error.
    fn request_error(&mut self, method: &str, params: Value) -> Value {
        let answer = self.answer(method, params);
        assert!(answer.get("result").is_none(), "{method} did not fail: {answer}");
        answer["error"].clone()
    }

    /// Sends a request and returns the message answering it.
    fn answer(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "server closed stdout"
            );
            let message: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line:?}"));
            assert_eq!(message["jsonrpc"], "2.0", "{line}");
            if message["id"] == json!(id) {
                return message;
            }
        }
    }

    fn initialize(&mut self) -> Value {
        let result = self.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}),
        );
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        result
    }

    fn edit(&mut self, arguments: Value) -> (String, bool) {
        let result = self.request(
            "tools/call",
            json!({"name": "text_editor", "arguments": arguments}),
        );
        let text = result["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        (text, result["isError"].as_bool().unwrap_or(false))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn every_command_over_stdio_of_the_real_executable() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let root_str = root.to_str().unwrap();
    let mut server = Server::spawn(common::editor_binary().path(), &["--root", root_str]);

    let init = server.initialize();
    assert_eq!(init["serverInfo"]["name"], "forgehand-editor");
    assert!(init["capabilities"]["tools"].is_object());

    let tools = server.request("tools/list", json!({}));
    let tools = tools["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0]["name"], "text_editor");
    let schema = &tools[0]["inputSchema"];
    assert_eq!(
        schema["properties"]["command"]["enum"],
        json!(["view", "create", "str_replace", "insert", "undo_edit"])
    );
    for field in [
        "path",
        "file_text",
        "old_str",
        "new_str",
        "insert_line",
        "view_range",
        "description",
    ] {
        assert!(schema["properties"][field].is_object(), "schema lacks {field}");
    }
    assert_eq!(schema["required"], json!(["command", "path"]));

    let file = format!("{root_str}/src/app.py");
    let (text, error) =
        server.edit(json!({"command": "create", "path": file, "file_text": "def main():\n    return 1\n"}));
    assert!(!error && text.contains("File created successfully"), "{text}");
    let (text, error) = server.edit(json!({"command": "view", "path": file}));
    assert!(!error && text.contains("     2\t    return 1"), "{text}");
    let (text, error) = server
        .edit(json!({"command": "str_replace", "path": file, "old_str": "return 1", "new_str": "return 2"}));
    assert!(!error && text.contains("return 2"), "{text}");
    let (text, error) =
        server.edit(json!({"command": "insert", "path": file, "insert_line": 0, "new_str": "import os"}));
    assert!(!error && text.contains("     1\timport os"), "{text}");
    let (text, error) = server.edit(json!({"command": "undo_edit", "path": file}));
    assert!(!error && text.contains("undone"), "{text}");
    assert_eq!(
        std::fs::read_to_string(root.join("src/app.py")).unwrap(),
        "def main():\n    return 2\n"
    );
    let (text, error) = server.edit(json!({"command": "view", "path": root_str}));
    assert!(
        !error && text.contains(&format!("{root_str}/src/app.py")),
        "{text}"
    );

    // Bad input is a tool result with isError, never a protocol error.
    let (text, error) = server.edit(json!({"command": "view", "path": "/etc/passwd"}));
    assert!(error && text.contains("outside the project folder"), "{text}");
    let (text, error) = server.edit(json!({"command": "explode", "path": file}));
    assert!(error && text.contains("Unknown command"), "{text}");
    let (text, error) = server.edit(json!({"path": file}));
    assert!(error && text.contains("Missing `command`"), "{text}");
    // An unknown tool is the JSON-RPC error -32602, as the MCP specification asks.
    let error = server.request_error("tools/call", json!({"name": "shell", "arguments": {}}));
    assert_eq!(error["code"], -32602);
    assert!(
        error["message"].as_str().unwrap().contains("Unknown tool: shell"),
        "{error}"
    );
}

#[test]
fn the_main_binary_serves_the_same_editor() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(root.join("a.txt"), "x\n").unwrap();
    let mut server = Server::spawn(
        env!("CARGO_BIN_EXE_forgehand"),
        &["mcp", "text-editor", "--root", root.to_str().unwrap()],
    );
    server.initialize();
    let (text, error) = server.edit(json!({"command": "view", "path": format!("{}/a.txt", root.display())}));
    assert!(!error && text.contains("     1\tx"), "{text}");
}

#[test]
fn a_root_that_does_not_exist_is_a_clear_startup_error() {
    let out = Command::new(common::editor_binary().path())
        .args(["--root", "/nonexistent/project"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "nothing but protocol bytes on stdout");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/nonexistent/project"), "{stderr}");
}
