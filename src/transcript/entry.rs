//! A transcript's entries, as journalled (JSON, one per row) and exported
//! (JSON Lines).

use serde::{Deserialize, Serialize};

/// Output kept whole up to this many characters; beyond it, its head and
/// its tail of this size each.
const KEPT_WHOLE: usize = 8_000;
const HEAD_AND_TAIL: usize = 3_000;

/// One thing that happened in a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Entry {
    /// The model answered.
    Model {
        step: u32,
        model: String,
        text: String,
        tool_calls: Vec<Call>,
        input_tokens: u64,
        cached_input_tokens: u64,
        output_tokens: u64,
        cost_usd: Option<f64>,
        ms: u64,
        /// Which of several attempts at the change answered (best of N).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        attempt: Option<u32>,
    },
    /// A tool call ran.
    Tool {
        step: u32,
        name: String,
        arguments: String,
        ok: bool,
        /// A command's exit code, when the tool ran one.
        exit_code: Option<i64>,
        /// The output whole, or its head when it was long.
        output: String,
        /// The output's tail, when it was long (the middle is left out).
        output_tail: Option<String>,
        /// How many characters the output had.
        output_chars: usize,
        /// An edit of the text editor, as a diff.
        diff: Option<String>,
        ms: u64,
        /// Which of several attempts at the change ran it (best of N).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        attempt: Option<u32>,
    },
    /// A model call outside the agent's loop: reading the thread
    /// (classification, summaries) or planning (the debaters, the judge).
    Call {
        purpose: String,
        model: String,
        /// The answer, whole or its head when long.
        text: String,
        input_tokens: u64,
        output_tokens: u64,
        cost_usd: Option<f64>,
        ms: u64,
    },
    /// A connection out of the sandbox, allowed or denied by the egress
    /// allowlist of its phase (setup, agent).
    Egress {
        phase: String,
        host: String,
        port: u16,
        /// Why it was denied; `None`: allowed.
        denied: Option<String>,
        bytes: u64,
        /// The name of the credential the relay added, never its value.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        credential: Option<String>,
    },
    /// Something the run said: its start, its end, a stop.
    Note { text: String },
    /// An image from the thread, shown to the models or refused.
    Image {
        /// Where it was linked from.
        source: String,
        alt: String,
        /// The type its bytes showed (`image/png`), when it was one.
        media_type: Option<String>,
        bytes: u64,
        /// Width and height in pixels, when known.
        #[serde(default)]
        size: Option<(u32, u32)>,
        /// A `data:` URL of the image when small enough to show on the page.
        #[serde(default)]
        thumbnail: Option<String>,
        /// Why it was not shown to the models; `None`: it was.
        refused: Option<String>,
    },
}

impl Entry {
    /// `#3`, or `#3 (attempt 2)` for a step of one of several attempts.
    pub fn step_label(&self) -> String {
        match self {
            Entry::Model { step, attempt, .. } | Entry::Tool { step, attempt, .. } => match attempt {
                Some(n) => format!("#{step} (attempt {n})"),
                None => format!("#{step}"),
            },
            _ => String::new(),
        }
    }

    /// A model answer's model, tokens, cost and time, `separator` between
    /// them: `gpt-5.6 · 100 in / 10 out · $0.0001 · 6 ms`.
    pub fn answer_meta(&self, separator: &str) -> Option<String> {
        let (Entry::Model {
            model,
            input_tokens,
            output_tokens,
            cost_usd,
            ms,
            ..
        }
        | Entry::Call {
            model,
            input_tokens,
            output_tokens,
            cost_usd,
            ms,
            ..
        }) = self
        else {
            return None;
        };
        let cost = cost_usd
            .map(|c| format!("{separator}${c:.4}"))
            .unwrap_or_default();
        Some(format!(
            "{model}{separator}{input_tokens} in / {output_tokens} out{cost}{separator}{ms} ms"
        ))
    }

    /// An egress decision's one line: `agent: pypi.org:443 allowed, 12 kB`.
    pub fn egress_line(&self) -> Option<String> {
        let Entry::Egress {
            phase,
            host,
            port,
            denied,
            bytes,
            credential,
        } = self
        else {
            return None;
        };
        let added = credential
            .as_ref()
            .map(|name| format!(", credential {name} added"))
            .unwrap_or_default();
        Some(match denied {
            None => format!("network, {phase}: {host}:{port} allowed{added} ({bytes} bytes)"),
            Some(why) => format!("network, {phase}: {host}:{port} denied: {why}"),
        })
    }

    /// An image's line: `image "the dialog": image/png, 1280×800, 48213 bytes, shown to the models`.
    pub fn image_line(&self) -> Option<String> {
        let Entry::Image {
            alt,
            media_type,
            bytes,
            size,
            refused,
            ..
        } = self
        else {
            return None;
        };
        let mut line = format!("image \"{alt}\": ");
        if let Some(kind) = media_type {
            line.push_str(&format!("{kind}, "));
        }
        if let Some((w, h)) = size {
            line.push_str(&format!("{w}×{h}, "));
        }
        line.push_str(&format!("{bytes} bytes, "));
        match refused {
            None => line.push_str("shown to the models"),
            Some(why) => line.push_str(&format!("not shown: {why}")),
        }
        Some(line)
    }
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Call {
    pub name: String,
    pub arguments: String,
}

/// `output` as kept: whole, or head and tail.
pub fn fold(output: &str) -> (String, Option<String>) {
    let chars = output.chars().count();
    if chars <= KEPT_WHOLE {
        return (output.to_owned(), None);
    }
    let head: String = output.chars().take(HEAD_AND_TAIL).collect();
    let tail: String = output.chars().skip(chars - HEAD_AND_TAIL).collect();
    (head, Some(tail))
}

/// A command's exit code, read from the command executor's result
/// (`exit code 1 (0.3 s)`).
pub fn exit_code(output: &str) -> Option<i64> {
    let rest = output.strip_prefix("exit code ")?;
    rest.split_whitespace().next()?.parse().ok()
}

/// The text editor's edits as a diff: what `str_replace` took out and
/// put in, what `create` wrote, what `insert` added.
pub fn edit_diff(tool: &str, arguments: &str) -> Option<String> {
    let args: serde_json::Value = serde_json::from_str(arguments).ok()?;
    let text = |key: &str| args.get(key).and_then(serde_json::Value::as_str);
    let path = text("path")?;
    let lines = |sign: char, body: &str| -> String { body.lines().map(|l| format!("{sign}{l}\n")).collect() };
    let body = if tool.ends_with("str_replace") {
        format!(
            "{}{}",
            lines('-', text("old_str")?),
            lines('+', text("new_str").unwrap_or(""))
        )
    } else if tool.ends_with("create") {
        lines('+', text("file_text").unwrap_or(""))
    } else if tool.ends_with("insert") {
        let at = args
            .get("insert_line")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0);
        format!(
            "@@ after line {at} @@\n{}",
            lines('+', text("new_str").or(text("text")).unwrap_or(""))
        )
    } else {
        return None;
    };
    Some(format!("--- {path}\n+++ {path}\n{body}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_become_diffs_and_long_outputs_fold() {
        let diff = edit_diff(
            "text_editor_str_replace",
            r#"{"path": "/w/greet.py", "old_str": "Hello", "new_str": "Hello,\nworld"}"#,
        )
        .unwrap();
        assert_eq!(
            diff,
            "--- /w/greet.py\n+++ /w/greet.py\n-Hello\n+Hello,\n+world\n"
        );
        assert!(edit_diff("text_editor_view", r#"{"path": "/w/greet.py"}"#).is_none());
        assert_eq!(exit_code("exit code 2 (0.1 s)\n--- stderr ---\nboom"), Some(2));
        assert_eq!(exit_code("No such file"), None);
        let long = "x".repeat(10_000);
        let (head, tail) = fold(&long);
        assert_eq!((head.len(), tail.map(|t| t.len())), (3_000, Some(3_000)));
        assert_eq!(fold("short"), ("short".to_owned(), None));
    }
}
