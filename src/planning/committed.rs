//! The files a work tree's HEAD commit tracks, read from its object
//! database for the planners' pack: the pack can start the moment the
//! repository is made, beside the checkout that writes the same files
//! (on a 2,000-file repository the checkout takes most of a second on
//! two busy cores, and reading the blobs a tenth of that).
//!
//! What is left out is what [`super::pack::read`] leaves out of a fresh
//! checkout: hidden files and folders (a name starting with `.`),
//! symbolic links, binary files, text that is not UTF-8 and files over
//! the size limit. Two things differ, by design: a tracked file an ignore
//! file matches is packed (it is part of the project: the repository
//! tracks it), and a file is read as committed, before a checkout's
//! line-ending conversion. A tree with a submodule is not read here (its
//! files are in another repository): the caller reads the checkout.

use super::pack::{Corpus, PackError, PackOptions, SkipReason, Skipped, SourceFile};
use git2::{ObjectType, Repository, TreeWalkMode, TreeWalkResult};
use std::path::Path;

/// Bytes looked at for a NUL when telling binary files from text (as the
/// pack does on disk).
const BINARY_SNIFF: usize = 8000;

/// The files HEAD tracks in the repository at `work_tree`, or `None` when
/// they must be read from the checkout (the tree has a submodule).
pub fn read(work_tree: &Path, options: PackOptions) -> Result<Option<Corpus>, PackError> {
    let failed = |detail: String| PackError::Root {
        root: work_tree.to_owned(),
        detail,
    };
    let repo = Repository::open(work_tree).map_err(|e| failed(format!("not a repository: {e}")))?;
    let tree = repo
        .head()
        .and_then(|head| head.peel_to_tree())
        .map_err(|e| failed(format!("HEAD has no tree: {e}")))?;
    let mut blobs = Vec::new();
    let mut skipped = Vec::new();
    let mut submodule = false;
    tree.walk(TreeWalkMode::PreOrder, |dir, entry| {
        let name = String::from_utf8_lossy(entry.name_bytes());
        let path = format!("{dir}{name}");
        if name.starts_with('.') {
            skipped.push(Skipped {
                path,
                reason: SkipReason::Hidden,
            });
            return TreeWalkResult::Skip;
        }
        match entry.kind() {
            Some(ObjectType::Commit) => {
                submodule = true;
                return TreeWalkResult::Abort;
            }
            // Symbolic links are not followed, as on disk.
            Some(ObjectType::Blob) if entry.filemode() != 0o120000 => {
                blobs.push((path, entry.id()));
            }
            _ => {}
        }
        TreeWalkResult::Ok
    })
    .or_else(|e| match submodule {
        true => Ok(()),
        false => Err(failed(format!("cannot read HEAD's tree: {e}"))),
    })?;
    if submodule {
        return Ok(None);
    }
    let odb = repo
        .odb()
        .map_err(|e| failed(format!("cannot open the object database: {e}")))?;
    let mut files = Vec::with_capacity(blobs.len());
    for (path, id) in blobs {
        match read_one(&odb, &path, id, options.max_file_bytes) {
            Ok(text) => files.push(SourceFile { path, text }),
            Err(reason) => skipped.push(Skipped { path, reason }),
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    skipped.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Some(Corpus { files, skipped }))
}

/// One blob's text, or why it is left out.
fn read_one(odb: &git2::Odb<'_>, path: &str, id: git2::Oid, max_bytes: u64) -> Result<String, SkipReason> {
    let unreadable = |e: git2::Error| SkipReason::Unreadable(format!("{path}: {e}"));
    let (bytes, _) = odb.read_header(id).map_err(unreadable)?;
    if bytes as u64 > max_bytes {
        return Err(SkipReason::TooLarge {
            bytes: bytes as u64,
            limit: max_bytes,
        });
    }
    let object = odb.read(id).map_err(unreadable)?;
    let data = object.data();
    if memchr::memchr(0, &data[..data.len().min(BINARY_SNIFF)]).is_some() {
        return Err(SkipReason::Binary);
    }
    String::from_utf8(data.to_vec()).map_err(|_| SkipReason::NotUtf8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) {
        let status = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .current_dir(dir)
            .status()
            .expect("git runs");
        assert!(status.success(), "git {args:?}");
    }

    fn write(dir: &Path, path: &str, bytes: &[u8]) {
        let file = dir.join(path);
        std::fs::create_dir_all(file.parent().expect("a parent")).expect("mkdir");
        std::fs::write(file, bytes).expect("write");
    }

    /// A committed tree of each kind of file, checked out.
    fn repository() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        git(root, &["init", "-q", "-b", "main"]);
        write(root, "src/main.rs", b"fn main() {}\n");
        write(root, "README.md", "# Projet \u{e9}t\u{e9}\n".as_bytes());
        write(root, "docs/guide/intro.txt", b"intro\n");
        write(root, ".github/workflows/ci.yml", b"on: push\n");
        write(root, ".env.example", b"KEY=\n");
        write(root, "logo.png", b"\x89PNG\r\n\x1a\n\0\0\0");
        write(root, "latin1.txt", b"caf\xe9\n");
        write(root, "big.txt", &vec![b'a'; 3000]);
        std::os::unix::fs::symlink("src/main.rs", root.join("link.rs")).expect("symlink");
        git(root, &["add", "-A"]);
        git(root, &["commit", "-q", "-m", "all kinds"]);
        dir
    }

    #[test]
    fn the_committed_files_are_what_the_checkout_would_pack() {
        let dir = repository();
        let options = PackOptions { max_file_bytes: 2048 };
        let committed = read(dir.path(), options).expect("reads").expect("no submodule");
        let on_disk = super::super::pack::read(dir.path(), &[".".to_owned()], options).expect("reads");
        let names = |files: &[SourceFile]| files.iter().map(|f| f.path.clone()).collect::<Vec<_>>();
        assert_eq!(
            names(&committed.files),
            ["README.md", "docs/guide/intro.txt", "src/main.rs"]
        );
        assert_eq!(names(&committed.files), names(&on_disk.files));
        for (a, b) in committed.files.iter().zip(&on_disk.files) {
            assert_eq!(a.text, b.text, "{}", a.path);
        }
        assert_eq!(committed.skipped, on_disk.skipped);
    }

    #[test]
    fn a_tree_with_a_submodule_is_left_to_the_checkout() {
        let dir = repository();
        let root = dir.path();
        let inner = tempfile::tempdir().expect("tempdir");
        git(inner.path(), &["init", "-q", "-b", "main"]);
        write(inner.path(), "lib.rs", b"pub fn f() {}\n");
        git(inner.path(), &["add", "-A"]);
        git(inner.path(), &["commit", "-q", "-m", "inner"]);
        let head = String::from_utf8(
            Command::new("git")
                .args(["rev-parse", "HEAD"])
                .current_dir(inner.path())
                .output()
                .expect("git runs")
                .stdout,
        )
        .expect("utf-8");
        let cacheinfo = format!("160000,{},vendor/lib", head.trim());
        git(root, &["update-index", "--add", "--cacheinfo", &cacheinfo]);
        git(root, &["commit", "-q", "-m", "a submodule"]);
        let read = read(root, PackOptions::default()).expect("reads");
        assert!(
            read.is_none(),
            "a submodule's files are not in this repository's objects"
        );
    }

    #[test]
    fn a_folder_that_is_not_a_repository_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = read(dir.path(), PackOptions::default()).expect_err("no repository");
        assert!(
            err.to_string().contains(&dir.path().display().to_string()),
            "{err}"
        );
        assert!(err.to_string().contains("not a repository"), "{err}");
    }
}
