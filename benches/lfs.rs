//! Checkout of 100 MB of Git LFS objects (20 files of 5 MiB) from an LFS
//! server on loopback (`forgehand_test_support::fake_lfs`, the batch API):
//! the time from the work tree's pointers to every file holding its
//! checked content, as a task's checkout runs it.
//!
//! Run: `cargo bench --bench lfs`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use forgehand::config::{LfsConfig, Secret};
use forgehand::git::lfs::{checkout, Access};
use forgehand::git::Credentials;
use forgehand_test_support::fake_lfs::FakeLfs;
use std::time::{Duration, Instant};

const FILES: usize = 20;
const FILE_BYTES: usize = 5 << 20;
const ROUNDS: usize = 5;

/// Bytes no compressor shrinks, different per file.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let lfs = FakeLfs::start("x-access-token", "bench-token").await;
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("repo");
    let repo = git2::Repository::init(&work).unwrap();
    let mut files = vec![
        (
            ".gitattributes".to_owned(),
            b"*.bin filter=lfs diff=lfs merge=lfs -text\n".to_vec(),
        ),
        (
            ".lfsconfig".to_owned(),
            format!("[lfs]\n\turl = {}\n", lfs.endpoint("acme/app")).into_bytes(),
        ),
    ];
    for n in 0..FILES {
        let pointer = lfs.put(&noise(n as u64 + 1, FILE_BYTES));
        files.push((format!("assets/file-{n:02}.bin"), pointer.into_bytes()));
    }
    let mut index = repo.index().unwrap();
    for (path, content) in &files {
        let full = work.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(&full, content).unwrap();
        index.add_path(std::path::Path::new(path)).unwrap();
    }
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let who = git2::Signature::now("bench", "bench@localhost").unwrap();
    repo.commit(Some("HEAD"), &who, &who, "assets", &tree, &[])
        .unwrap();

    let clone_url = format!("{}/acme/app.git", lfs.server.uri());
    let credentials = Credentials {
        username: "x-access-token".into(),
        token: Secret::new("bench-token"),
    };
    let access = Access::new(&clone_url, &LfsConfig::default(), credentials).unwrap();
    let endpoint = checkout::endpoint_of(&repo, &tree, &clone_url).unwrap();
    let total = (FILES * FILE_BYTES) as f64;
    let mut times = Vec::new();
    for _ in 0..ROUNDS {
        let (work, endpoint, access) = (work.clone(), endpoint.clone(), access.clone());
        let started = Instant::now();
        let fetched =
            tokio::task::spawn_blocking(move || checkout::fetch_head(&work, Ok(endpoint), &access, 1 << 30))
                .await
                .unwrap()
                .unwrap();
        times.push(started.elapsed());
        assert_eq!(fetched.files.len(), FILES, "{:?}", fetched.left);
        assert_eq!(fetched.bytes as f64, total);
    }
    times.sort();
    let median = times[ROUNDS / 2];
    let rate = |d: Duration| total / d.as_secs_f64() / 1e6;
    println!(
        "LFS checkout of {FILES} files, {:.0} MB, from a batch-API server on loopback: median {:.0} ms ({:.0} MB/s), best {:.0} ms, worst {:.0} ms, {ROUNDS} rounds",
        total / 1e6,
        median.as_secs_f64() * 1e3,
        rate(median),
        times[0].as_secs_f64() * 1e3,
        times[ROUNDS - 1].as_secs_f64() * 1e3
    );
    println!("reproduce: cargo bench --bench lfs");
}
