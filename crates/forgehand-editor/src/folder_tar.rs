//! A folder to a tar stream and back, inside the sandbox
//! (`forgehand-editor pack` / `unpack`), for setup snapshots. The sandbox's
//! home folder is a tmpfs, which the engine's archive API cannot see, so
//! forgehand's own static binary does the packing where the files are,
//! whatever tools the image lacks.

use std::io::{self, Read, Write};
use std::path::{Component, Path};

/// Writes `dir`'s contents as a tar stream (symlinks kept as links, names
/// relative to `dir`). Sockets and other special files are left out: setup
/// leaves none worth keeping, and they cannot be restored anyway.
pub fn pack(dir: &Path, out: impl Write) -> io::Result<()> {
    let mut builder = tar::Builder::new(out);
    builder.follow_symlinks(false);
    builder.mode(tar::HeaderMode::Complete);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        let mut names: Vec<_> = std::fs::read_dir(&folder)?.collect::<Result<_, _>>()?;
        names.sort_by_key(|entry| entry.file_name());
        for entry in names {
            let path = entry.path();
            let Ok(relative) = path.strip_prefix(dir) else {
                continue;
            };
            let kind = entry.file_type()?;
            if kind.is_dir() {
                builder.append_path_with_name(&path, relative)?;
                stack.push(path);
            } else if kind.is_file() || kind.is_symlink() {
                builder.append_path_with_name(&path, relative)?;
            }
        }
    }
    builder.into_inner()?.flush()
}

/// What [`unpack`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Unpacked {
    pub written: u64,
    /// Entries whose path already held a file: the fresh one is kept.
    pub kept_existing: u64,
}

/// What an unpack does with a path that already holds a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// The file there stays (a snapshot never writes over the fresh
    /// clone's files).
    Keep,
    /// The archive's entry replaces it (a copy into the sandbox, as the
    /// engine's archive API does).
    Replace,
}

/// Unpacks a tar stream into `dir`, never over an existing file (the fresh
/// clone's files win over a snapshot's) and never outside `dir`.
pub fn unpack(input: impl Read, dir: &Path) -> io::Result<Unpacked> {
    unpack_with(input, dir, Existing::Keep)
}

/// Unpacks a tar stream into `dir` (created when missing), never outside
/// it; `existing` says what becomes of a path that holds a file already.
pub fn unpack_with(input: impl Read, dir: &Path, existing: Existing) -> io::Result<Unpacked> {
    std::fs::create_dir_all(dir)?;
    let mut archive = tar::Archive::new(input);
    archive.set_preserve_permissions(true);
    archive.set_preserve_mtime(true);
    archive.set_unpack_xattrs(false);
    archive.set_overwrite(existing == Existing::Replace);
    let mut counts = Unpacked::default();
    for entry in archive.entries()? {
        let mut entry = entry?;
        let path = entry.path()?.into_owned();
        if path
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} leaves the folder; refusing the archive", path.display()),
            ));
        }
        let target = dir.join(&path);
        let is_dir = entry.header().entry_type().is_dir();
        if existing == Existing::Keep {
            match std::fs::symlink_metadata(&target) {
                Ok(meta) if !(is_dir && meta.is_dir()) => {
                    counts.kept_existing += 1;
                    continue;
                }
                _ => {}
            }
        }
        if entry.unpack_in(dir)? {
            counts.written += 1;
        }
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_folder_round_trips_with_links_modes_and_never_overwrites() {
        let from = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(from.path().join(".venv/bin")).unwrap();
        std::fs::write(from.path().join(".venv/bin/tool"), "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            from.path().join(".venv/bin/tool"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::os::unix::fs::symlink("/usr/bin/python3", from.path().join(".venv/bin/python")).unwrap();
        std::fs::write(from.path().join("README.md"), "old").unwrap();
        let mut bytes = Vec::new();
        pack(from.path(), &mut bytes).unwrap();

        let to = tempfile::tempdir().unwrap();
        std::fs::write(to.path().join("README.md"), "fresh").unwrap();
        let counts = unpack(bytes.as_slice(), to.path()).unwrap();
        assert_eq!(counts.kept_existing, 1);
        assert_eq!(
            std::fs::read_to_string(to.path().join("README.md")).unwrap(),
            "fresh"
        );
        let mode = std::fs::metadata(to.path().join(".venv/bin/tool"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
        assert_eq!(
            std::fs::read_link(to.path().join(".venv/bin/python")).unwrap(),
            Path::new("/usr/bin/python3")
        );
    }

    #[test]
    fn a_copy_replaces_what_is_there_and_makes_its_folder() {
        let from = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(from.path().join("src")).unwrap();
        std::fs::write(from.path().join("src/lib.rs"), "new").unwrap();
        let mut bytes = Vec::new();
        pack(from.path(), &mut bytes).unwrap();
        let to = tempfile::tempdir().unwrap();
        let dir = to.path().join("made/here");
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(dir.join("src/lib.rs"), "old").unwrap();
        let counts = unpack_with(bytes.as_slice(), &dir, Existing::Replace).unwrap();
        assert_eq!(counts.kept_existing, 0);
        assert_eq!(std::fs::read_to_string(dir.join("src/lib.rs")).unwrap(), "new");
        let fresh = to.path().join("fresh");
        unpack_with(bytes.as_slice(), &fresh, Existing::Replace).unwrap();
        assert_eq!(std::fs::read_to_string(fresh.join("src/lib.rs")).unwrap(), "new");
    }

    #[test]
    fn an_archive_that_climbs_out_is_refused() {
        let mut bytes = Vec::new();
        {
            let mut builder = tar::Builder::new(&mut bytes);
            let mut header = tar::Header::new_gnu();
            header.set_size(1);
            header.set_mode(0o644);
            header.set_entry_type(tar::EntryType::Regular);
            // `set_path` refuses `..`, as it should; write the raw name.
            header.as_gnu_mut().unwrap().name[..9].copy_from_slice(b"../escape");
            header.set_cksum();
            builder.append(&header, &b"x"[..]).unwrap();
        }
        let to = tempfile::tempdir().unwrap();
        let err = unpack(bytes.as_slice(), &to.path().join("inner")).unwrap_err();
        assert!(err.to_string().contains("leaves the folder"), "{err}");
    }
}
