//! `forgehand-editor`: the text-editor MCP server, as a small static
//! executable copied into (or built into) every sandbox image.
//!
//!     forgehand-editor [--root DIR] [--max-view-bytes N]
//!     forgehand-editor idle
//!     forgehand-editor supervise [--dir DIR] [--proxy ADDR [--egress-socket PATH]]
//!     forgehand-editor pack DIR | forgehand-editor unpack DIR | forgehand-editor untar DIR
//!
//! `idle` does nothing until it is stopped: it is the sandbox container's main
//! process, so an image needs no `sleep` (not even a shell) to stay up.
//! `supervise` carries forgehand's commands and egress tunnels over one
//! multiplexed stream on stdin/stdout (see `forgehand_editor::supervisor`).
//! `pack` writes a folder as tar to stdout, `unpack` reads one from stdin
//! (never over an existing file): forgehand's setup snapshots. `untar`
//! reads one from stdin over what is there, as the engine's archive API
//! does: forgehand's copies into the sandbox, over the supervisor.
//!
//! stdout carries MCP JSON-RPC only; logs go to stderr (level from
//! `FORGEHAND_EDITOR_LOG`, default `warn`).

use forgehand_editor::{server, Limits, Root, DEFAULT_ROOT};
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: forgehand-editor [--root DIR] [--max-view-bytes N] | forgehand-editor idle | forgehand-editor supervise [--dir DIR] [--proxy ADDR [--egress-socket PATH]] | forgehand-editor pack DIR | forgehand-editor unpack DIR | forgehand-editor untar DIR";

enum Action {
    Serve(PathBuf, Limits),
    Supervise(PathBuf, Option<forgehand_editor::supervisor::Proxy>),
    Pack(PathBuf),
    Unpack(PathBuf, forgehand_editor::folder_tar::Existing),
    Print(String),
    Idle,
}

fn parse_args() -> Result<Action, String> {
    let mut root = PathBuf::from(DEFAULT_ROOT);
    let mut limits = Limits::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--root" => root = args.next().ok_or("--root needs a folder")?.into(),
            "--max-view-bytes" => {
                let value = args.next().ok_or("--max-view-bytes needs a number")?;
                limits.max_view_bytes =
                    value.parse().ok().filter(|n| *n >= 256).ok_or_else(|| {
                        format!("--max-view-bytes {value:?} is not a number of at least 256")
                    })?;
            }
            "idle" => return Ok(Action::Idle),
            "pack" => return Ok(Action::Pack(args.next().ok_or("pack needs a folder")?.into())),
            "unpack" => {
                let dir = args.next().ok_or("unpack needs a folder")?;
                return Ok(Action::Unpack(
                    dir.into(),
                    forgehand_editor::folder_tar::Existing::Keep,
                ));
            }
            "untar" => {
                let dir = args.next().ok_or("untar needs a folder")?;
                return Ok(Action::Unpack(
                    dir.into(),
                    forgehand_editor::folder_tar::Existing::Replace,
                ));
            }
            "supervise" => {
                let mut dir = PathBuf::from(DEFAULT_ROOT);
                let mut proxy = None;
                let mut socket = None;
                while let Some(arg) = args.next() {
                    match arg.as_str() {
                        "--dir" => dir = args.next().ok_or("--dir needs a folder")?.into(),
                        "--proxy" => {
                            let value = args.next().ok_or("--proxy needs an address")?;
                            proxy = Some(value.parse().map_err(|_| {
                                format!("--proxy {value:?} is not an address such as 127.0.0.1:3128")
                            })?);
                        }
                        "--egress-socket" => {
                            socket = Some(PathBuf::from(args.next().ok_or("--egress-socket needs a path")?));
                        }
                        other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
                    }
                }
                let proxy = match (proxy, socket) {
                    (Some(listen), socket) => Some(forgehand_editor::supervisor::Proxy { listen, socket }),
                    (None, Some(_)) => return Err(format!("--egress-socket needs --proxy\n{USAGE}")),
                    (None, None) => None,
                };
                return Ok(Action::Supervise(dir, proxy));
            }
            "--version" => {
                return Ok(Action::Print(format!(
                    "forgehand-editor {}",
                    env!("CARGO_PKG_VERSION")
                )))
            }
            "-h" | "--help" => return Ok(Action::Print(USAGE.to_owned())),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    Ok(Action::Serve(root, limits))
}

fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_env("FORGEHAND_EDITOR_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let (root_dir, limits) = match parse_args() {
        Ok(Action::Serve(root, limits)) => (root, limits),
        Ok(Action::Supervise(dir, proxy)) => {
            let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(runtime) => runtime,
                Err(e) => {
                    eprintln!("forgehand-editor: cannot start: {e}");
                    return ExitCode::FAILURE;
                }
            };
            return match runtime.block_on(forgehand_editor::supervisor::serve(dir, proxy)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(message) => {
                    eprintln!("forgehand-editor: {message}");
                    ExitCode::FAILURE
                }
            };
        }
        Ok(Action::Pack(dir)) => {
            let out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
            return match forgehand_editor::folder_tar::pack(&dir, out) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("forgehand-editor: cannot pack {}: {e}", dir.display());
                    ExitCode::FAILURE
                }
            };
        }
        Ok(Action::Unpack(dir, existing)) => {
            let input = std::io::BufReader::with_capacity(1 << 16, std::io::stdin().lock());
            return match forgehand_editor::folder_tar::unpack_with(input, &dir, existing) {
                Ok(counts) => {
                    eprintln!(
                        "forgehand-editor: unpacked {} entries into {} ({} kept as they were)",
                        counts.written,
                        dir.display(),
                        counts.kept_existing
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("forgehand-editor: cannot unpack into {}: {e}", dir.display());
                    ExitCode::FAILURE
                }
            };
        }
        Ok(Action::Idle) => loop {
            // The container's init (tini) delivers SIGTERM, whose default
            // action ends this process.
            std::thread::sleep(std::time::Duration::from_secs(3600));
        },
        Ok(Action::Print(text)) => {
            use std::io::Write;
            let _ = writeln!(std::io::stdout(), "{text}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    let root = match Root::new(&root_dir) {
        Ok(root) => root,
        Err(e) => {
            eprintln!(
                "forgehand-editor: cannot use {} as the root: {e}",
                root_dir.display()
            );
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("forgehand-editor: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(server::serve_stdio(root, limits)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("forgehand-editor: {message}");
            ExitCode::FAILURE
        }
    }
}
