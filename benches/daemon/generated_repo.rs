//! A large repository made deterministically with `git fast-import`: 2,000
//! files in 40 nested folders and 50,000 commits after the first, each
//! rewriting a block of lines in 2 to 4 files with pseudo-random text from
//! a small LCG seeded by the commit's number. Repacked into one pack, as a
//! forge serves it (a 391 MB pack, 578k objects). Made once and kept under
//! `target/bench-repos/<VERSION>.git`; change `VERSION` whenever the
//! generator changes.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

pub const VERSION: &str = "large-v1";
/// Commits after the first (which adds every file).
pub const COMMITS: u64 = 50_000;
const FILES: usize = 2_000;
const FILES_PER_FOLDER: usize = 50;
/// Folders `src/areaNN/partN`: 8 areas of 5 parts.
const PARTS_PER_AREA: usize = 5;
const LINES_PER_FILE: usize = 150;
/// A change rewrites 1..=MAX_BLOCK consecutive lines of a file.
const MAX_BLOCK: usize = 60;

/// Knuth's MMIX LCG; the high bits are the output.
struct Lcg(u64);

impl Lcg {
    fn seeded(seed: u64) -> Lcg {
        Lcg(seed
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(0x632B_E59B_D9B4_E019))
    }

    fn step(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: usize) -> usize {
        (self.step() % n as u64) as usize
    }
}

const SYLLABLES: [&str; 32] = [
    "ka", "lo", "mi", "ne", "ra", "tu", "vo", "zi", "pa", "qu", "sen", "dor", "fal", "gri", "hon", "jas",
    "mek", "nol", "ost", "pri", "rus", "sta", "tel", "ulm", "vex", "wyn", "xan", "yor", "zel", "bri", "cho",
    "dus",
];

fn word(rng: &mut Lcg) -> String {
    let syllables = 2 + rng.below(2);
    (0..syllables).map(|_| SYLLABLES[rng.below(32)]).collect()
}

/// One line of Python-looking code.
fn line(rng: &mut Lcg) -> String {
    let indent = "    ".repeat(rng.below(3));
    match rng.below(4) {
        0 => format!(
            "{indent}{} = {}({}, {})",
            word(rng),
            word(rng),
            word(rng),
            rng.below(10_000)
        ),
        1 => format!(
            "{indent}if {} > {}: return {}",
            word(rng),
            rng.below(1_000),
            word(rng)
        ),
        2 => format!(
            "{indent}# {} {} {} {}",
            word(rng),
            word(rng),
            word(rng),
            word(rng)
        ),
        _ => format!(
            "{indent}{}.{}({}, {}={})",
            word(rng),
            word(rng),
            word(rng),
            word(rng),
            rng.below(100)
        ),
    }
}

fn path(file: usize) -> String {
    let folder = file / FILES_PER_FOLDER;
    format!(
        "src/area{:02}/part{}/module_{:02}.py",
        folder / PARTS_PER_AREA,
        folder % PARTS_PER_AREA,
        file % FILES_PER_FOLDER
    )
}

fn text(lines: &[String]) -> String {
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

/// Rewrites a block of `lines` as commit `rng` says.
fn rewrite_block(lines: &mut [String], rng: &mut Lcg) {
    let block = 1 + rng.below(MAX_BLOCK.min(lines.len()));
    let start = rng.below(lines.len() - block + 1);
    for line_text in &mut lines[start..start + block] {
        *line_text = line(rng);
    }
}

/// Commit `n`'s changes applied to `files`: the files it changed.
fn change(files: &mut [Vec<String>], n: u64) -> Vec<usize> {
    let mut rng = Lcg::seeded(n);
    let count = 2 + rng.below(3);
    let mut changed = Vec::new();
    while changed.len() < count {
        let file = rng.below(FILES);
        if !changed.contains(&file) {
            changed.push(file);
        }
    }
    changed.sort_unstable();
    for &file in &changed {
        rewrite_block(&mut files[file], &mut rng);
    }
    changed
}

fn data(out: &mut dyn Write, bytes: &[u8]) -> std::io::Result<()> {
    writeln!(out, "data {}", bytes.len())?;
    out.write_all(bytes)?;
    writeln!(out)
}

/// Commit `n` on `main` setting `changes` (path, text); `parent` when the
/// branch already exists in the repository (an incremental import).
fn write_commit(
    out: &mut dyn Write,
    n: u64,
    parent: Option<&str>,
    changes: &[(String, String)],
) -> std::io::Result<()> {
    writeln!(out, "commit refs/heads/main")?;
    let when = 1_600_000_000 + n * 600;
    writeln!(out, "committer Bench <bench@localhost> {when} +0000")?;
    data(out, format!("Change {n}").as_bytes())?;
    if let Some(parent) = parent {
        writeln!(out, "from {parent}")?;
    }
    for (path, text) in changes {
        writeln!(out, "M 100644 inline {path}")?;
        data(out, text.as_bytes())?;
    }
    Ok(())
}

/// The whole history as a fast-import stream.
fn write_history(out: &mut dyn Write) -> std::io::Result<()> {
    let mut rng = Lcg::seeded(0);
    let mut files: Vec<Vec<String>> = (0..FILES)
        .map(|_| (0..LINES_PER_FILE).map(|_| line(&mut rng)).collect())
        .collect();
    let all: Vec<(String, String)> = files
        .iter()
        .enumerate()
        .map(|(i, f)| (path(i), text(f)))
        .collect();
    write_commit(out, 0, None, &all)?;
    for n in 1..=COMMITS {
        let changes: Vec<(String, String)> = change(&mut files, n)
            .into_iter()
            .map(|file| (path(file), text(&files[file])))
            .collect();
        write_commit(out, n, None, &changes)?;
    }
    writeln!(out, "done")
}

fn git(git_dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Feeds `stream`'s output to `git fast-import` in `git_dir`.
fn fast_import(git_dir: &Path, stream: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) {
    let mut child = Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .args(["fast-import", "--quiet", "--done"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = BufWriter::with_capacity(1 << 20, child.stdin.take().unwrap());
    stream(&mut input).unwrap();
    input.flush().unwrap();
    drop(input);
    assert!(child.wait().unwrap().success(), "git fast-import failed");
}

/// The repository, made under `dir` when it is not there yet.
pub fn cached(dir: &Path) -> PathBuf {
    let repo = dir.join(format!("{VERSION}.git"));
    if repo.exists() {
        println!("large repository: reusing {}", repo.display());
        return repo;
    }
    std::fs::create_dir_all(dir).unwrap();
    let partial = dir.join(format!("{VERSION}.git.partial-{}", std::process::id()));
    let started = Instant::now();
    let init = Command::new("git")
        .args(["init", "--quiet", "--bare", "--initial-branch=main"])
        .arg(&partial)
        .status()
        .unwrap();
    assert!(init.success(), "git init --bare failed");
    fast_import(&partial, write_history);
    let imported = started.elapsed();
    // fast-import deltas each blob against the previous one written (another
    // file): recompute every delta, as a forge's gc would.
    git(&partial, &["repack", "-a", "-d", "-f", "-q"]);
    git(&partial, &["prune-packed"]);
    let seconds = started.elapsed().as_secs_f64();
    std::fs::write(
        partial.join("bench-generation-seconds"),
        format!("{seconds:.0}\n"),
    )
    .unwrap();
    // Whole or absent: a run stopped halfway leaves only the partial folder.
    std::fs::rename(&partial, &repo).unwrap();
    println!(
        "large repository: generated in {seconds:.0} s (fast-import {:.0} s, repack {:.0} s)",
        imported.as_secs_f64(),
        seconds - imported.as_secs_f64()
    );
    repo
}

/// Pack size, commits and objects of `repo`, and how long it took to make.
pub fn describe(repo: &Path) -> String {
    let pack_bytes: u64 = std::fs::read_dir(repo.join("objects/pack"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
        .map(|e| e.metadata().unwrap().len())
        .sum();
    let commits = git(repo, &["rev-list", "--count", "HEAD"]);
    let counts = git(repo, &["count-objects", "-v"]);
    let field = |name: &str| -> u64 {
        counts
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    let generation = std::fs::read_to_string(repo.join("bench-generation-seconds")).unwrap_or_default();
    format!(
        "pack {:.1} MB, {} commits, {} objects ({} packed, {} loose), {} files; generated in {} s",
        pack_bytes as f64 / 1e6,
        commits.trim(),
        field("in-pack:") + field("count:"),
        field("in-pack:"),
        field("count:"),
        FILES,
        generation.trim()
    )
}

/// Commit `n` (after the generated history) on `main` of `repo`, as the
/// generator would have made it: a block of lines rewritten in one file.
pub fn push_commit(repo: &Path, n: u64) {
    let mut rng = Lcg::seeded(n);
    let file = rng.below(FILES);
    let current = git(repo, &["cat-file", "blob", &format!("main:{}", path(file))]);
    let mut lines: Vec<String> = current.lines().map(str::to_owned).collect();
    rewrite_block(&mut lines, &mut rng);
    let changes = [(path(file), text(&lines))];
    fast_import(repo, |out| {
        write_commit(out, n, Some("refs/heads/main^0"), &changes)?;
        writeln!(out, "done")
    });
}
