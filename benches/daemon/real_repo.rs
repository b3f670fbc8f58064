//! A repository of real content: the standard library of the `python3` on
//! the machine (CPython's `Lib/`, as pyenv or the distribution installs
//! it), without its tests, `site-packages`, bytecode, bundled wheels and
//! build files: about 15 MB in 1,000+ files of real source. Committed once
//! (a fixed author and date) and kept under
//! `target/bench-repos/real-cpython-<version>-<VERSION>.git`, beside the
//! generated large history (`generated_repo`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Change whenever what is taken from the standard library changes.
const VERSION: &str = "v2";
/// Folders of the standard library left out, at its top (its own tests,
/// installed packages).
const SKIPPED_FOLDERS: [&str; 2] = ["site-packages", "test"];
/// Files left out: compiled code, bundled wheels and installers.
const SKIPPED_EXTENSIONS: [&str; 6] = ["so", "a", "whl", "exe", "pyc", "o"];

/// The standard library's folder and Python's version, as `python3` says.
fn stdlib() -> (PathBuf, String) {
    let out = Command::new("python3")
        .args([
            "-c",
            "import sys, sysconfig; print(sysconfig.get_path('stdlib')); print(sys.version.split()[0])",
        ])
        .output()
        .expect("python3 on the PATH (its standard library is the real-content repository)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    let dir = PathBuf::from(lines.next().expect("python3's stdlib folder"));
    let version = lines.next().expect("python3's version").to_owned();
    (dir, version)
}

/// Every file of `dir` worth taking, relative to `root`.
fn sources(root: &Path, dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().filter_map(Result::ok) {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            let skipped =
                dir == root && (SKIPPED_FOLDERS.contains(&name.as_str()) || name.starts_with("config-"));
            if !skipped && name != "__pycache__" {
                sources(root, &path, into);
            }
        } else if kind.is_file() {
            let extension = path.extension().map(|e| e.to_string_lossy().into_owned());
            if !extension.is_some_and(|e| SKIPPED_EXTENSIONS.contains(&e.as_str())) {
                into.push(path.strip_prefix(root).unwrap().to_owned());
            }
        }
    }
}

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@localhost")
        .env("GIT_AUTHOR_DATE", "2024-01-01T00:00:00Z")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@localhost")
        .env("GIT_COMMITTER_DATE", "2024-01-01T00:00:00Z")
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?} in {}", dir.display());
}

/// The repository, made under `dir` when it is not there yet.
pub fn cached(dir: &Path) -> PathBuf {
    let (stdlib, version) = stdlib();
    let repo = dir.join(format!("real-cpython-{version}-{VERSION}.git"));
    if repo.exists() {
        return repo;
    }
    std::fs::create_dir_all(dir).unwrap();
    let work = tempfile::tempdir_in(dir).unwrap();
    let mut files = Vec::new();
    sources(&stdlib, &stdlib, &mut files);
    files.sort();
    let mut bytes = 0;
    for file in &files {
        let to = work.path().join(file);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        bytes += std::fs::copy(stdlib.join(file), &to).unwrap();
    }
    git(work.path(), &["init", "--quiet", "--initial-branch=main"]);
    git(work.path(), &["add", "-A"]);
    git(
        work.path(),
        &[
            "commit",
            "--quiet",
            "-m",
            &format!("CPython {version}'s standard library"),
        ],
    );
    let partial = dir.join(format!("real-cpython-{version}.partial-{}", std::process::id()));
    let clone = Command::new("git")
        .args(["clone", "--quiet", "--bare"])
        .arg(work.path())
        .arg(&partial)
        .status()
        .unwrap();
    assert!(clone.success(), "git clone --bare of the real-content work tree");
    let source = format!(
        "CPython {version}'s standard library from {} ({} files, {:.1} MB; its test/ and site-packages/, bytecode, wheels and build files left out)",
        stdlib.display(),
        files.len(),
        bytes as f64 / 1e6
    );
    std::fs::write(partial.join("bench-source"), source).unwrap();
    // Whole or absent: a run stopped halfway leaves only the partial folder.
    std::fs::rename(&partial, &repo).unwrap();
    repo
}

/// Where the repository's files came from, their count and size.
pub fn describe(repo: &Path) -> String {
    std::fs::read_to_string(repo.join("bench-source")).unwrap_or_else(|_| repo.display().to_string())
}
