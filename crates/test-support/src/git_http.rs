//! A smart-HTTP git server for tests: real `git http-backend` (the CGI that
//! serves git over HTTP) behind a small HTTP/1.1 front that demands Basic
//! authentication with one token, on 127.0.0.1.

use base64::Engine;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

pub use crate::git_rules::{
    protect_branch, refuse_workflow_files, refuse_workflow_files_from, refused_pushes, Pusher,
};

pub struct GitHttpServer {
    pub addr: SocketAddr,
    pub root: PathBuf,
    pub refused: Arc<AtomicUsize>,
    /// Bytes of every response written so far (heads and bodies).
    sent: Arc<AtomicU64>,
    /// While `true`, a fetch's pack stops half-way (see [`GitHttpServer::hold_packs`]).
    held: tokio::sync::watch::Sender<bool>,
    /// Packs stopped half-way right now.
    stopped: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for GitHttpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl GitHttpServer {
    /// Serves the bare repositories under `root` to `username`:`token`.
    pub async fn start(root: &Path, username: &str, token: &str) -> GitHttpServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let expected = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{username}:{token}"))
        );
        let refused = Arc::new(AtomicUsize::new(0));
        let sent = Arc::new(AtomicU64::new(0));
        let (root_dir, counter, user) = (root.to_owned(), refused.clone(), username.to_owned());
        let sent_total = sent.clone();
        let (held, hold) = tokio::sync::watch::channel(false);
        let stopped = Arc::new(AtomicUsize::new(0));
        let stopped_now = stopped.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (root, expected, counter, user, sent) = (
                    root_dir.clone(),
                    expected.clone(),
                    counter.clone(),
                    user.clone(),
                    sent_total.clone(),
                );
                let (hold, stopped) = (hold.clone(), stopped_now.clone());
                tokio::spawn(async move {
                    let counts = Counters {
                        refused: &counter,
                        sent: &sent,
                        hold,
                        stopped: &stopped,
                    };
                    let _ = serve(stream, &root, &expected, &user, counts).await;
                });
            }
        });
        GitHttpServer {
            addr,
            root: root.to_owned(),
            refused,
            sent,
            held,
            stopped,
            task,
        }
    }

    /// While held, every response that carries a pack stops half-way
    /// through its body (the client has a partial pack and waits) until let
    /// go: a client killed meanwhile was killed mid-fetch.
    pub fn hold_packs(&self, held: bool) {
        self.held.send_replace(held);
    }

    /// How many packs are stopped half-way right now.
    pub fn packs_stopped(&self) -> usize {
        self.stopped.load(Ordering::SeqCst)
    }

    /// Bytes the server has sent so far, over every connection: what
    /// clones and fetches cost on the wire.
    pub fn bytes_sent(&self) -> u64 {
        self.sent.load(Ordering::SeqCst)
    }

    pub fn url(&self, repo: &str) -> String {
        format!("http://{}/{repo}", self.addr)
    }
}

/// What a connection adds to (refused requests, bytes sent) and whether
/// its pack stops half-way.
struct Counters<'a> {
    refused: &'a AtomicUsize,
    sent: &'a AtomicU64,
    hold: tokio::sync::watch::Receiver<bool>,
    stopped: &'a AtomicUsize,
}

/// One request per connection (`Connection: close`), which git clients accept.
async fn serve(
    stream: TcpStream,
    root: &Path,
    expected: &str,
    user: &str,
    counts: Counters<'_>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    reader.read_line(&mut request_line).await?;
    let mut parts = request_line.split_whitespace();
    let (method, target) = (
        parts.next().unwrap_or("").to_owned(),
        parts.next().unwrap_or("").to_owned(),
    );
    let mut headers = HashMap::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).await?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
        }
    }
    let mut body = Vec::new();
    if headers
        .get("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        loop {
            let mut size_line = String::new();
            reader.read_line(&mut size_line).await?;
            let size =
                usize::from_str_radix(size_line.trim().split(';').next().unwrap_or("0"), 16).unwrap_or(0);
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).await?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(length) = headers
        .get("content-length")
        .and_then(|v| v.parse::<usize>().ok())
    {
        body.resize(length, 0);
        reader.read_exact(&mut body).await?;
    }
    let mut stream = reader.into_inner();
    if headers.get("authorization").map(String::as_str) != Some(expected) {
        counts.refused.fetch_add(1, Ordering::SeqCst);
        let refusal: &[u8] = b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        stream.write_all(refusal).await?;
        counts.sent.fetch_add(refusal.len() as u64, Ordering::SeqCst);
        return Ok(());
    }
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let mut cgi = tokio::process::Command::new("git");
    cgi.arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", &method)
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env(
            "CONTENT_TYPE",
            headers.get("content-type").cloned().unwrap_or_default(),
        )
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("REMOTE_USER", user)
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(encoding) = headers.get("content-encoding") {
        cgi.env("HTTP_CONTENT_ENCODING", encoding);
    }
    // Where the repository's rules (git_rules.rs) leave GitHub's words for
    // each ref they refuse, to go into the report.
    let statuses = match path.ends_with("/git-receive-pack") {
        true => Some(tempfile::NamedTempFile::new()?),
        false => None,
    };
    if let Some(file) = &statuses {
        cgi.env(crate::git_rules::STATUS_FILE_VAR, file.path());
    }
    let mut child = cgi.spawn()?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let writer = tokio::spawn(async move {
        let _ = stdin.write_all(&body).await;
    });
    let output = child.wait_with_output().await?;
    let _ = writer.await;
    let out = output.stdout;
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| (p, 4))
        .or_else(|| out.windows(2).position(|w| w == b"\n\n").map(|p| (p, 2)))
        .unwrap_or((out.len(), 0));
    let head = String::from_utf8_lossy(&out[..split.0]).into_owned();
    let content = &out[(split.0 + split.1).min(out.len())..];
    let reasons = statuses
        .map(|file| crate::git_rules::read_statuses(file.path()))
        .unwrap_or_default();
    let rewritten = crate::git_rules::rewrite_report(content, &reasons);
    let content = rewritten.as_slice();
    let mut status = "200 OK".to_owned();
    let mut response = String::new();
    for line in head.lines() {
        match line.split_once(':') {
            Some((name, value)) if name.eq_ignore_ascii_case("status") => status = value.trim().to_owned(),
            Some(_) => {
                response.push_str(line.trim_end());
                response.push_str("\r\n");
            }
            None => {}
        }
    }
    let head = format!(
        "HTTP/1.1 {status}\r\n{response}Content-Length: {}\r\nConnection: close\r\n\r\n",
        content.len()
    );
    stream.write_all(head.as_bytes()).await?;
    let mut hold = counts.hold.clone();
    let carries_pack = content.windows(4).any(|w| w == b"PACK");
    let rest = if path.ends_with("/git-upload-pack") && carries_pack && *hold.borrow() {
        let (first, rest) = content.split_at(content.len() / 2);
        stream.write_all(first).await?;
        stream.flush().await?;
        counts.sent.fetch_add(first.len() as u64, Ordering::SeqCst);
        counts.stopped.fetch_add(1, Ordering::SeqCst);
        let _ = hold.wait_for(|held| !*held).await;
        counts.stopped.fetch_sub(1, Ordering::SeqCst);
        rest
    } else {
        content
    };
    stream.write_all(rest).await?;
    counts
        .sent
        .fetch_add((head.len() + rest.len()) as u64, Ordering::SeqCst);
    stream.shutdown().await
}

/// A bare repository `name` under `root` whose `main` branch holds `files`
/// in one commit.
pub fn bare_repo(root: &Path, name: &str, files: &[(&str, &str)]) -> PathBuf {
    use git2::{Repository, RepositoryInitOptions};
    let bare = root.join(name);
    let repo = Repository::init_bare(&bare).unwrap();
    repo.set_head("refs/heads/main").unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut options = RepositoryInitOptions::new();
    options.initial_head("main");
    let seed = Repository::init_opts(work.path(), &options).unwrap();
    let mut index = seed.index().unwrap();
    for (path, text) in files {
        let full = work.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(&full, text).unwrap();
        index.add_path(Path::new(path)).unwrap();
    }
    index.write().unwrap();
    let tree = seed.find_tree(index.write_tree().unwrap()).unwrap();
    let who = git2::Signature::now("seed", "seed@localhost").unwrap();
    seed.commit(Some("HEAD"), &who, &who, "initial", &tree, &[])
        .unwrap();
    seed.remote_anonymous(&format!("file://{}", bare.display()))
        .unwrap()
        .push(&["refs/heads/main:refs/heads/main"], None)
        .unwrap();
    bare
}

/// The files of `branch`'s tip.
pub fn files_of(bare: &Path, branch: &str) -> Vec<String> {
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(bare)
        .args(["ls-tree", "-r", "--name-only", branch])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A commit on `branch` that adds a submodule's gitlink at `path`, pointing
/// at `commit` (which the bare repository does not hold, as a superproject
/// does not), pushed straight into the bare repository.
pub fn add_gitlink(bare: &Path, branch: &str, path: &str, commit: &str) {
    use git2::{IndexEntry, IndexTime, Oid, Repository};
    let repo = Repository::open_bare(bare).unwrap();
    let head = repo
        .find_reference(&format!("refs/heads/{branch}"))
        .unwrap()
        .peel_to_commit()
        .unwrap();
    let mut index = git2::Index::new().unwrap();
    index.read_tree(&head.tree().unwrap()).unwrap();
    index
        .add(&IndexEntry {
            ctime: IndexTime::new(0, 0),
            mtime: IndexTime::new(0, 0),
            dev: 0,
            ino: 0,
            mode: 0o160000,
            uid: 0,
            gid: 0,
            file_size: 0,
            id: Oid::from_str(commit).unwrap(),
            flags: 0,
            flags_extended: 0,
            path: path.as_bytes().to_vec(),
        })
        .unwrap();
    let tree = repo.find_tree(index.write_tree_to(&repo).unwrap()).unwrap();
    let who = git2::Signature::now("seed", "seed@localhost").unwrap();
    repo.commit(
        Some(&format!("refs/heads/{branch}")),
        &who,
        &who,
        "add a submodule",
        &tree,
        &[&head],
    )
    .unwrap();
}

/// Someone else's commit: `file` set to `text` on `branch` (created from
/// `main` when missing), pushed straight into the bare repository.
pub fn push_commit(bare: &Path, branch: &str, file: &str, text: &str, message: &str) {
    let work = tempfile::tempdir().unwrap();
    let url = format!("file://{}", bare.display());
    let repo = git2::Repository::clone(&url, work.path()).unwrap();
    let start = repo
        .find_reference(&format!("refs/remotes/origin/{branch}"))
        .or_else(|_| repo.find_reference("refs/remotes/origin/main"))
        .unwrap()
        .peel_to_commit()
        .unwrap();
    std::fs::write(work.path().join(file), text).unwrap();
    let mut index = repo.index().unwrap();
    index.read_tree(&start.tree().unwrap()).unwrap();
    index.add_path(Path::new(file)).unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let who = git2::Signature::now("someone", "someone@localhost").unwrap();
    let oid = repo.commit(None, &who, &who, message, &tree, &[&start]).unwrap();
    repo.reference(&format!("refs/heads/{branch}"), oid, true, "push")
        .unwrap();
    repo.find_remote("origin")
        .unwrap()
        .push(&[format!("+refs/heads/{branch}:refs/heads/{branch}")], None)
        .unwrap();
}

/// The subject lines of `branch` in the bare repository, newest first.
pub fn log(bare: &Path, branch: &str) -> Vec<String> {
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(bare)
        .args(["log", "--format=%s", branch])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The commit at the head of `branch` in the bare repository.
pub fn head_of(bare: &Path, branch: &str) -> String {
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(bare)
        .args(["rev-parse", branch])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}
