//! What forgehand runs inside a sandbox, as one small static executable
//! (`forgehand-editor`) that needs nothing from the image:
//!
//! - the text editor the model edits files with: the five commands of the
//!   Claude text editor tool (`view`, `create`, `str_replace`, `insert`,
//!   `undo_edit`) as pure logic over a root folder, and their MCP server;
//! - the [`supervisor`], which carries forgehand's commands and egress
//!   tunnels over one multiplexed stream;
//! - [`folder_tar`], which packs and unpacks setup snapshots where the
//!   files are.
//!
//! It is a crate of its own so that the executable links none of the
//! daemon's dependencies.
//!
//! Every failure is an [`EditorError`] whose text tells the model what was
//! wrong and what to do next; the server returns it as a tool result with
//! `isError: true`, never as a protocol error.

mod edit;
pub mod folder_tar;
mod history;
mod paths;
pub mod server;
pub mod supervisor;
mod text;
mod view;

pub use paths::Root;

use history::History;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// The default folder the editor may touch inside a sandbox.
pub const DEFAULT_ROOT: &str = "/workspace/project";
/// The MCP tool name, as the specification's server calls it.
pub const TOOL_NAME: &str = "text_editor";

/// Size limits that keep a single call cheap for the model and the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest `view` output; longer output is cut with a marker.
    pub max_view_bytes: usize,
    /// Largest file the editor reads or edits.
    pub max_file_bytes: u64,
    /// Memory kept for undo, across all files.
    pub max_history_bytes: usize,
    /// Undo steps kept per file.
    pub max_history_depth: usize,
    /// Most entries a directory `view` lists.
    pub max_dir_entries: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_view_bytes: 16 * 1024,
            max_file_bytes: 32 * 1024 * 1024,
            max_history_bytes: 64 * 1024 * 1024,
            max_history_depth: 50,
            max_dir_entries: 1000,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EditorError {
    #[error("{0}")]
    InvalidArguments(String),
    #[error("The path {path} resolves to {resolved}, which is outside the project folder {root}. Only files under {root} can be viewed or edited.", resolved = resolved.display(), root = root.display())]
    OutsideRoot {
        path: String,
        resolved: PathBuf,
        root: PathBuf,
    },
    #[error("The path {path} does not exist. Use `view` on its folder to see what is there, or `create` to make a new file.", path = path.display())]
    NotFound { path: PathBuf },
    #[error("{0}")]
    Refused(String),
    #[error("Could not access {path}: {source}", path = path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl EditorError {
    fn io(path: &Path, source: std::io::Error) -> EditorError {
        if source.kind() == std::io::ErrorKind::NotFound {
            return EditorError::NotFound {
                path: path.to_owned(),
            };
        }
        EditorError::Io {
            path: path.to_owned(),
            source,
        }
    }
}

/// One parsed call of the editor tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    View {
        path: String,
        view_range: Option<(i64, i64)>,
    },
    Create {
        path: String,
        file_text: String,
    },
    StrReplace {
        path: String,
        old_str: String,
        new_str: String,
    },
    Insert {
        path: String,
        insert_line: i64,
        new_str: String,
    },
    UndoEdit {
        path: String,
    },
}

pub const COMMANDS: [&str; 5] = ["view", "create", "str_replace", "insert", "undo_edit"];

impl Command {
    /// Parses the tool's JSON arguments, naming any missing or mistyped field.
    pub fn from_json(args: &Map<String, Value>) -> Result<Command, EditorError> {
        let command = string_arg(args, "command")?.ok_or_else(|| {
            EditorError::InvalidArguments(format!("Missing `command`; use one of: {}.", COMMANDS.join(", ")))
        })?;
        let path = || {
            string_arg(args, "path")?.ok_or_else(|| {
                EditorError::InvalidArguments(format!(
                    "Missing `path` for `{command}`; give an absolute path such as {DEFAULT_ROOT}/README.md."
                ))
            })
        };
        let required = |field: &str| {
            string_arg(args, field)?.ok_or_else(|| {
                EditorError::InvalidArguments(format!("Missing `{field}`, which `{command}` requires."))
            })
        };
        Ok(match command.as_str() {
            "view" => Command::View {
                path: path()?,
                view_range: view_range_arg(args)?,
            },
            "create" => Command::Create {
                path: path()?,
                file_text: required("file_text")?,
            },
            "str_replace" => Command::StrReplace {
                path: path()?,
                old_str: required("old_str")?,
                // An omitted `new_str` deletes `old_str`, as in the Claude tool.
                new_str: string_arg(args, "new_str")?.unwrap_or_default(),
            },
            "insert" => Command::Insert {
                path: path()?,
                insert_line: integer_arg(args, "insert_line")?.ok_or_else(|| {
                    EditorError::InvalidArguments(
                        "Missing `insert_line`, which `insert` requires: 0 inserts at the top, N after line N.".into(),
                    )
                })?,
                new_str: required("new_str")?,
            },
            "undo_edit" => Command::UndoEdit { path: path()? },
            other => {
                return Err(EditorError::InvalidArguments(format!(
                    "Unknown command `{other}`; use one of: {}.",
                    COMMANDS.join(", ")
                )))
            }
        })
    }
}

fn string_arg(args: &Map<String, Value>, field: &str) -> Result<Option<String>, EditorError> {
    match args.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(EditorError::InvalidArguments(format!(
            "`{field}` must be a string, not {}.",
            kind_of(other)
        ))),
    }
}

fn integer_arg(args: &Map<String, Value>, field: &str) -> Result<Option<i64>, EditorError> {
    match args.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => as_integer(value).map(Some).ok_or_else(|| {
            EditorError::InvalidArguments(format!(
                "`{field}` must be a whole number, not {}.",
                kind_of(value)
            ))
        }),
    }
}

/// Models sometimes send numbers as strings ("12"); accept those too.
fn as_integer(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn view_range_arg(args: &Map<String, Value>) -> Result<Option<(i64, i64)>, EditorError> {
    let bad = |detail: String| {
        EditorError::InvalidArguments(format!(
            "`view_range` must be two whole numbers [start, end], 1-based and inclusive, with end -1 for the end of the file; {detail}"
        ))
    };
    match args.get("view_range") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) if items.len() == 2 => {
            let start =
                as_integer(&items[0]).ok_or_else(|| bad(format!("got {}", Value::Array(items.clone()))))?;
            let end =
                as_integer(&items[1]).ok_or_else(|| bad(format!("got {}", Value::Array(items.clone()))))?;
            Ok(Some((start, end)))
        }
        Some(other) => Err(bad(format!("got {other}"))),
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The editor over one root folder, with its undo history.
pub struct Editor {
    root: Root,
    limits: Limits,
    history: History,
}

impl Editor {
    pub fn new(root: Root, limits: Limits) -> Editor {
        Editor {
            history: History::new(limits.max_history_bytes, limits.max_history_depth),
            root,
            limits,
        }
    }

    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// Runs one call given as the tool's JSON arguments.
    pub fn execute_json(&mut self, args: &Map<String, Value>) -> Result<String, EditorError> {
        let command = Command::from_json(args)?;
        self.execute(&command)
    }

    pub fn execute(&mut self, command: &Command) -> Result<String, EditorError> {
        match command {
            Command::View { path, view_range } => {
                let real = self.root.resolve(path)?;
                view::view(&real, path, *view_range, &self.limits)
            }
            Command::Create { path, file_text } => {
                let real = self.root.resolve(path)?;
                edit::create(&real, path, file_text, &mut self.history)
            }
            Command::StrReplace {
                path,
                old_str,
                new_str,
            } => {
                let real = self.root.resolve(path)?;
                edit::str_replace(&real, path, old_str, new_str, &self.limits, &mut self.history)
            }
            Command::Insert {
                path,
                insert_line,
                new_str,
            } => {
                let real = self.root.resolve(path)?;
                edit::insert(
                    &real,
                    path,
                    *insert_line,
                    new_str,
                    &self.limits,
                    &mut self.history,
                )
            }
            Command::UndoEdit { path } => {
                let real = self.root.resolve(path)?;
                edit::undo(&real, path, &mut self.history)
            }
        }
    }
}
