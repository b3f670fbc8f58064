//! The benchmarks' workspace.
#![allow(clippy::unwrap_used)]

use std::path::Path;

/// A 10 MB workspace shaped like a repository: 40 folders of 5 files each.
pub fn make_workspace(root: &Path) {
    let line = b"fn main() { println!(\"x\"); }\n";
    let content: Vec<u8> = (0..50 * 1024).map(|i| line[i % line.len()]).collect();
    for folder in 0..40 {
        let dir = root.join(format!("src/module_{folder}"));
        std::fs::create_dir_all(&dir).unwrap();
        for file in 0..5 {
            std::fs::write(dir.join(format!("file_{file}.rs")), &content).unwrap();
        }
    }
}
