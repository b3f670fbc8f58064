//! Real package registries on 127.0.0.1, standing in for the internet in
//! the repository-environment tests: pypiserver (PyPI's simple API) and
//! verdaccio (the npm registry's API). `scripts/dev-env.sh` installs both
//! under `$FORGEHAND_DEV_STATE` (default `/tmp/forgehand-dev`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn dev_state() -> PathBuf {
    std::env::var_os("FORGEHAND_DEV_STATE").map_or_else(|| PathBuf::from("/tmp/forgehand-dev"), PathBuf::from)
}

pub(crate) fn tool(relative: &str) -> PathBuf {
    let path = dev_state().join(relative);
    assert!(
        path.is_file(),
        "{} is missing; run scripts/dev-env.sh",
        path.display()
    );
    path
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A registry process this test started, ended (by its PID) when dropped.
pub struct Registry {
    pub port: u16,
    pub(crate) child: Child,
    pub dir: tempfile::TempDir,
}

impl Registry {
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub(crate) fn wait_until_up(mut self, path: &str) -> Registry {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "the registry exited with {status}; its log is in {}",
                    self.dir.path().display()
                );
            }
            if http_ok(self.port, path) {
                return self;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the registry on port {} did not answer within 60 s",
                self.port
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http_ok(port: u16, path: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut socket) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = socket.set_read_timeout(Some(Duration::from_secs(5)));
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    if socket.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    socket.read_exact(&mut head).is_ok()
        && (head.starts_with(b"HTTP/1.1 200") || head.starts_with(b"HTTP/1.0 200"))
}

/// A pure-Python wheel of `name` `version` whose `__init__.py` is `source`,
/// written into `dir` (built with the host's Python: a wheel is a zip with
/// metadata and a RECORD of hashes).
pub(crate) fn build_wheel(dir: &Path, name: &str, version: &str, source: &str) {
    const SCRIPT: &str = r#"
import base64, hashlib, sys, zipfile
name, version, out, source = sys.argv[1:5]
dist = f"{name}-{version}.dist-info"
files = {
    f"{name}/__init__.py": source,
    f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
    f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: forgehand-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
with zipfile.ZipFile(f"{out}/{name}-{version}-py3-none-any.whl", "w") as wheel:
    for path, text in files.items():
        data = text.encode()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
        wheel.writestr(path, data)
    record.append(f"{dist}/RECORD,,")
    wheel.writestr(f"{dist}/RECORD", "\n".join(record) + "\n")
"#;
    let status = Command::new("python3")
        .args(["-c", SCRIPT, name, version])
        .arg(dir)
        .arg(source)
        .status()
        .unwrap();
    assert!(status.success(), "building the wheel failed");
}

/// pypiserver on 127.0.0.1 holding one package, with no fallback to any
/// other index.
pub fn pypi_with(name: &str, version: &str, source: &str) -> Registry {
    let dir = tempfile::tempdir().unwrap();
    let packages = dir.path().join("packages");
    std::fs::create_dir_all(&packages).unwrap();
    build_wheel(&packages, name, version, source);
    start_pypiserver(dir, &[], "/simple/")
}

/// pypiserver on a free loopback port serving `<dir>/packages`, with
/// `extra` arguments (authentication), up once `ready` answers.
pub(crate) fn start_pypiserver(dir: tempfile::TempDir, extra: &[&std::ffi::OsStr], ready: &str) -> Registry {
    let port = free_port();
    let log = std::fs::File::create(dir.path().join("pypiserver.log")).unwrap();
    let child = Command::new(tool("pypiserver-venv/bin/pypi-server"))
        .args([
            "run",
            "-i",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "--disable-fallback",
        ])
        .args(extra)
        .arg(dir.path().join("packages"))
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    Registry { port, child, dir }.wait_until_up(ready)
}

/// verdaccio on 127.0.0.1 holding one package, `name` `version` whose
/// `index.js` is `source`, published with npm by a throwaway user. No
/// uplink: nothing else is ever fetched.
pub fn npm_with(name: &str, version: &str, source: &str) -> Registry {
    let registry = start_verdaccio(free_port(), "$all", None);
    // A user of the registry's own (CouchDB's user API), for its token.
    let token = npm_user_token(&registry, "tester", "tester-password");
    npm_publish(&registry, &token, name, version, source);
    registry
}

/// A new user of `registry` (verdaccio's CouchDB user API), and its token.
pub(crate) fn npm_user_token(registry: &Registry, user: &str, password: &str) -> String {
    let url = registry.url();
    let token = Command::new("node")
        .args([
            "-e",
            &format!(
                "fetch('{url}/-/user/org.couchdb.user:{user}', {{method: 'PUT', headers: {{'content-type': 'application/json'}}, body: JSON.stringify({{name: '{user}', password: '{password}'}})}}).then(r => r.json()).then(j => process.stdout.write(j.token || JSON.stringify(j)))"
            ),
        ])
        .output()
        .unwrap();
    let token = String::from_utf8_lossy(&token.stdout).into_owned();
    assert!(
        !token.is_empty() && !token.starts_with('{'),
        "no token from verdaccio: {token}"
    );
    token
}

/// Publishes the package `name`@`version` with `index.js` holding
/// `source` to `registry`, as the user of `token`.
pub(crate) fn npm_publish(registry: &Registry, token: &str, name: &str, version: &str, source: &str) {
    let (url, port) = (registry.url(), registry.port);
    let package = registry.dir.path().join("package");
    std::fs::create_dir_all(&package).unwrap();
    std::fs::write(
        package.join("package.json"),
        format!("{{\"name\": \"{name}\", \"version\": \"{version}\", \"main\": \"index.js\", \"license\": \"MIT\"}}\n"),
    )
    .unwrap();
    std::fs::write(package.join("index.js"), source).unwrap();
    let npmrc = registry.dir.path().join("npmrc");
    std::fs::write(&npmrc, format!("//127.0.0.1:{port}/:_authToken={token}\n")).unwrap();
    let published = Command::new("npm")
        .args(["publish", "--registry", &format!("{url}/")])
        .arg("--userconfig")
        .arg(&npmrc)
        .current_dir(&package)
        .output()
        .unwrap();
    assert!(
        published.status.success(),
        "npm publish failed: {}",
        String::from_utf8_lossy(&published.stderr)
    );
}

/// A verdaccio on loopback `port` whose packages `access` may read
/// (`$all`, `$authenticated`) and only its users publish; no uplink.
/// `public_url`: the address its answers name tarballs at (a TLS front).
pub(crate) fn start_verdaccio(port: u16, access: &str, public_url: Option<String>) -> Registry {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "storage: {storage}\nauth:\n  htpasswd:\n    file: {htpasswd}\n    max_users: 10\nuplinks: {{}}\npackages:\n  '**':\n    access: {access}\n    publish: $authenticated\nlog: {{type: stdout, format: pretty, level: warn}}\n",
            storage = dir.path().join("storage").display(),
            htpasswd = dir.path().join("htpasswd").display(),
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.path().join("verdaccio.log")).unwrap();
    let mut command = Command::new(tool("verdaccio/node_modules/.bin/verdaccio"));
    command
        .arg("--config")
        .arg(&config)
        .args(["--listen", &format!("127.0.0.1:{port}")]);
    if let Some(url) = public_url {
        command.env("VERDACCIO_PUBLIC_URL", url);
    }
    let child = command
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    Registry { port, child, dir }.wait_until_up("/-/ping")
}
