//! A kubeconfig file for the tests' fake API servers (no credentials: the
//! fakes on loopback do not ask for any).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

/// A kubeconfig in `dir` naming the API server at `url`, namespace `default`.
pub fn write_kubeconfig(dir: &Path, url: &str) -> PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: \"{url}\"\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n    namespace: default\ncurrent-context: fake\nusers:\n- name: fake\n  user: {{}}\n"
        ),
    )
    .unwrap();
    path
}
