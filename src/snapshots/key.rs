//! Which setup snapshot a task may start from: the key is a SHA-256 over
//! everything that decides what setup writes, and whose it is.
//!
//! - the forge and repository (`github:owner/name`): a snapshot is never
//!   shared with another repository, whatever else they have in common (its
//!   home folder could hold hooks or wrappers planted for the other's tasks);
//! - the image's id (its config digest, so a rebuilt image is a new key);
//! - the setup commands, in order;
//! - the `env` variables and the hosts setup may reach;
//! - the contents of the repository's dependency files: every tracked file
//!   named in [`DEPENDENCY_FILES`] (or matching `requirements*.txt` /
//!   `constraints*.txt`) at any depth, and every file a setup command names
//!   by its path (a `scripts/setup.sh`, a `requirements/dev.txt`).
//!
//! Any other change to the repository (its source, its tests) keeps the
//! key: the project's own files always come from the fresh clone.

use crate::repo_settings::RepoSettings;
use sha2::{Digest, Sha256};
use std::path::{Component, Path};

/// Manifests, lockfiles and toolchain pins, by file name.
pub const DEPENDENCY_FILES: &[&str] = &[
    // Python
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "Pipfile",
    "Pipfile.lock",
    "poetry.lock",
    "uv.lock",
    "pdm.lock",
    "environment.yml",
    ".python-version",
    // JavaScript
    "package.json",
    "package-lock.json",
    "npm-shrinkwrap.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "bun.lockb",
    ".npmrc",
    ".yarnrc.yml",
    ".nvmrc",
    ".node-version",
    // Rust
    "Cargo.toml",
    "Cargo.lock",
    "rust-toolchain",
    "rust-toolchain.toml",
    // Go
    "go.mod",
    "go.sum",
    "go.work",
    "go.work.sum",
    // JVM
    "pom.xml",
    "build.gradle",
    "build.gradle.kts",
    "settings.gradle",
    "settings.gradle.kts",
    "gradle.properties",
    "gradle-wrapper.properties",
    "libs.versions.toml",
    // Others
    "Gemfile",
    "Gemfile.lock",
    "composer.json",
    "composer.lock",
    "mix.exs",
    "mix.lock",
    ".tool-versions",
];

/// Names by pattern: `requirements-dev.txt`, `constraints.txt`.
fn is_dependency_file(name: &str) -> bool {
    DEPENDENCY_FILES.contains(&name)
        || ((name.starts_with("requirements") || name.starts_with("constraints")) && name.ends_with(".txt"))
}

/// A snapshot key and the files whose contents went into it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotKey {
    pub key: String,
    /// Paths relative to the repository's root, sorted.
    pub inputs: Vec<String>,
}

/// The key for running `settings`' setup on `checkout`, a clone of
/// `repository` (`forge:owner/name`), in the image whose id is `image_id`.
pub fn compute(
    repository: &str,
    checkout: &Path,
    image_id: &str,
    settings: &RepoSettings,
) -> std::io::Result<SnapshotKey> {
    let mut inputs = dependency_files(checkout);
    for path in files_named_in(&settings.setup, checkout) {
        if !inputs.contains(&path) {
            inputs.push(path);
        }
    }
    inputs.sort();
    let mut hash = Sha256::new();
    let mut field = |name: &str, value: &[u8]| {
        hash.update(name.as_bytes());
        hash.update((value.len() as u64).to_le_bytes());
        hash.update(value);
    };
    // 3: snapshots of setups that ran on a tree holding the model's
    // commits (follow-ups, before they ran without credentials and were
    // never kept) are never restored.
    field("format", b"forgehand-snapshot-3");
    field("repository", repository.as_bytes());
    field("image", image_id.as_bytes());
    for command in &settings.setup {
        field("setup", command.as_bytes());
    }
    for (name, value) in &settings.env {
        field("env", format!("{name}={value}").as_bytes());
    }
    let mut hosts: Vec<String> = settings.setup_hosts.iter().map(ToString::to_string).collect();
    hosts.sort();
    for host in hosts {
        field("host", host.as_bytes());
    }
    for path in &inputs {
        field("path", path.as_bytes());
        field("contents", &std::fs::read(checkout.join(path))?);
    }
    Ok(SnapshotKey {
        key: hex(&hash.finalize()),
        inputs,
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every dependency file in the clone, `.git` left out.
fn dependency_files(checkout: &Path) -> Vec<String> {
    let walk = ignore::WalkBuilder::new(checkout)
        .standard_filters(false)
        .filter_entry(|entry| entry.file_name() != ".git")
        .build();
    walk.flatten()
        .filter(|entry| entry.file_type().is_some_and(|t| t.is_file()))
        .filter(|entry| entry.file_name().to_str().is_some_and(is_dependency_file))
        .filter_map(|entry| relative(checkout, entry.path()))
        .collect()
}

/// Files of the clone that a setup command names by a relative path.
fn files_named_in(commands: &[String], checkout: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for command in commands {
        let words = command.split(|c: char| c.is_whitespace() || ";|&<>()'\"=`".contains(c));
        for word in words.filter(|w| !w.is_empty() && !w.starts_with('-')) {
            let path = Path::new(word.trim_start_matches("./"));
            let inside = path.components().all(|c| matches!(c, Component::Normal(_)));
            if !inside || path.as_os_str().is_empty() {
                continue;
            }
            let full = checkout.join(path);
            if std::fs::symlink_metadata(&full).is_ok_and(|m| m.is_file()) {
                if let Some(relative) = relative(checkout, &full) {
                    if !found.contains(&relative) {
                        found.push(relative);
                    }
                }
            }
        }
    }
    found
}

fn relative(root: &Path, path: &Path) -> Option<String> {
    path.strip_prefix(root).ok()?.to_str().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn settings(setup: &[&str]) -> RepoSettings {
        RepoSettings {
            setup: setup.iter().map(|s| (*s).to_owned()).collect(),
            ..RepoSettings::default()
        }
    }

    fn repo(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let full = dir.path().join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, text).unwrap();
        }
        dir
    }

    #[test]
    fn lockfiles_and_named_scripts_decide_the_key_and_source_does_not() {
        let files = [
            ("requirements.txt", "dep==1.0\n"),
            ("web/package-lock.json", "{}"),
            ("scripts/setup.sh", "pip install -r requirements.txt\n"),
            ("app.py", "print(1)\n"),
            (".git/config", "[core]\n"),
        ];
        let setup = settings(&["sh ./scripts/setup.sh", "echo ok > out.txt"]);
        let first = compute("github:o/r", repo(&files).path(), "sha256:a", &setup).unwrap();
        assert_eq!(
            first.inputs,
            vec!["requirements.txt", "scripts/setup.sh", "web/package-lock.json"]
        );
        let mut source_changed = files;
        source_changed[3] = ("app.py", "print(2)\n");
        assert_eq!(
            compute("github:o/r", repo(&source_changed).path(), "sha256:a", &setup).unwrap(),
            first
        );
        let mut lock_changed = files;
        lock_changed[0] = ("requirements.txt", "dep==1.1\n");
        assert_ne!(
            compute("github:o/r", repo(&lock_changed).path(), "sha256:a", &setup)
                .unwrap()
                .key,
            first.key
        );
        let mut script_changed = files;
        script_changed[2] = ("scripts/setup.sh", "pip install dep\n");
        assert_ne!(
            compute("github:o/r", repo(&script_changed).path(), "sha256:a", &setup)
                .unwrap()
                .key,
            first.key
        );
        assert_ne!(
            compute("github:o/r", repo(&files).path(), "sha256:b", &setup)
                .unwrap()
                .key,
            first.key
        );
        // Another repository with the very same inputs never shares it.
        assert_ne!(
            compute("github:o/other", repo(&files).path(), "sha256:a", &setup)
                .unwrap()
                .key,
            first.key
        );
        assert_ne!(
            compute("gitlab:o/r", repo(&files).path(), "sha256:a", &setup)
                .unwrap()
                .key,
            first.key
        );
        let other_setup = settings(&["sh ./scripts/setup.sh"]);
        assert_ne!(
            compute("github:o/r", repo(&files).path(), "sha256:a", &other_setup)
                .unwrap()
                .key,
            first.key
        );
    }

    #[test]
    fn a_path_outside_the_clone_is_never_read() {
        let dir = repo(&[("a.txt", "x")]);
        assert!(
            files_named_in(&["cat ../../etc/passwd /etc/hostname a.txt".into()], dir.path()) == vec!["a.txt"]
        );
    }
}
