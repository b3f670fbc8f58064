//! Tar streams for moving trees in and out of a sandbox through the Docker
//! archive API (no bind mounts, so the same code can serve other backends).
//! Packing streams from disk; unpacking refuses anything that would land
//! outside the destination and skips device files and fifos.

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

/// Writes a tar of `src_dir`'s contents under the top-level folder `top` into
/// `out`. Every entry is owned by `uid:gid` (the sandbox user), modes and
/// mtimes are kept, symlinks are stored as symlinks.
pub fn pack_dir<W: Write>(src_dir: &Path, top: &str, uid: u64, gid: u64, out: W) -> io::Result<W> {
    let mut builder = tar::Builder::new(out);
    builder.follow_symlinks(false);
    let top = PathBuf::from(top);
    append_entry(&mut builder, src_dir, &top, uid, gid)?;
    append_children(&mut builder, src_dir, &top, uid, gid)?;
    builder.into_inner()
}

/// A tar holding one file at `relative` (e.g. `.forgehand/bin/tool`) and
/// every folder above it, all owned by `uid:gid`.
pub fn file_with_parents(
    relative: &str,
    contents: &[u8],
    mode: u32,
    uid: u64,
    gid: u64,
) -> io::Result<Vec<u8>> {
    let mtime = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let header = |kind: tar::EntryType, size: u64, mode: u32| {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(kind);
        header.set_size(size);
        header.set_mode(mode);
        header.set_uid(uid);
        header.set_gid(gid);
        header.set_mtime(mtime);
        header
    };
    let mut builder = tar::Builder::new(Vec::with_capacity(contents.len() + 4096));
    let path = Path::new(relative);
    let mut parents: Vec<&Path> = path
        .ancestors()
        .skip(1)
        .filter(|p| !p.as_os_str().is_empty())
        .collect();
    parents.reverse();
    for parent in parents {
        builder.append_data(
            &mut header(tar::EntryType::Directory, 0, 0o755),
            parent,
            io::empty(),
        )?;
    }
    builder.append_data(
        &mut header(tar::EntryType::Regular, contents.len() as u64, mode),
        path,
        contents,
    )?;
    builder.into_inner()
}

fn append_children<W: Write>(
    builder: &mut tar::Builder<W>,
    dir: &Path,
    name: &Path,
    uid: u64,
    gid: u64,
) -> io::Result<()> {
    let mut entries: Vec<_> = fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let child_name = name.join(entry.file_name());
        append_entry(builder, &path, &child_name, uid, gid)?;
        if entry.file_type()?.is_dir() {
            append_children(builder, &path, &child_name, uid, gid)?;
        }
    }
    Ok(())
}

fn append_entry<W: Write>(
    builder: &mut tar::Builder<W>,
    path: &Path,
    name: &Path,
    uid: u64,
    gid: u64,
) -> io::Result<()> {
    let meta = fs::symlink_metadata(path)?;
    let mut header = tar::Header::new_gnu();
    header.set_metadata_in_mode(&meta, tar::HeaderMode::Complete);
    header.set_uid(uid);
    header.set_gid(gid);
    // The host's user and group names mean nothing inside the sandbox.
    header.set_username("")?;
    header.set_groupname("")?;
    let file_type = meta.file_type();
    if file_type.is_symlink() {
        let target = fs::read_link(path)?;
        builder.append_link(&mut header, name, target)
    } else if file_type.is_file() {
        builder.append_data(&mut header, name, fs::File::open(path)?)
    } else if file_type.is_dir() {
        builder.append_data(&mut header, name, io::empty())
    } else {
        // Sockets, fifos and devices have no place in a workspace copy.
        Ok(())
    }
}

/// Unpacks a tar read from `input` whose entries sit under one top-level
/// folder, putting that folder's contents into `dest` (created if missing).
/// Returns the number of entries written.
pub fn unpack_stripped<R: Read>(input: R, dest: &Path) -> io::Result<u64> {
    fs::create_dir_all(dest)?;
    let mut archive = tar::Archive::new(input);
    archive.set_preserve_permissions(false);
    archive.set_preserve_ownerships(false);
    archive.set_unpack_xattrs(false);
    archive.set_overwrite(true);
    let mut written = 0;
    // Directory modes are applied last, so a read-only folder from the
    // sandbox does not stop its own children from being written.
    let mut dir_modes: Vec<(PathBuf, u32)> = Vec::new();
    for entry in archive.entries()? {
        let mut entry = entry?;
        let kind = entry.header().entry_type();
        if !(kind.is_file() || kind.is_dir() || kind.is_symlink() || kind.is_hard_link()) {
            continue;
        }
        let raw_path = entry.path()?.into_owned();
        let relative = strip_top(&raw_path).ok_or_else(|| escape_error(&raw_path))?;
        if relative.as_os_str().is_empty() {
            continue;
        }
        let target = dest.join(&relative);
        if kind.is_dir() {
            make_dirs_inside(dest, &relative)?;
            let mode = entry.header().mode().unwrap_or(0o755) & 0o777;
            dir_modes.push((relative, mode));
            written += 1;
            continue;
        }
        if let Some(parent) = relative.parent() {
            make_dirs_inside(dest, parent)?;
        }
        entry.set_mask(0o022);
        if kind.is_hard_link() {
            let source = entry
                .link_name()?
                .as_deref()
                .and_then(strip_top)
                .filter(|p| !p.as_os_str().is_empty())
                .ok_or_else(|| escape_error(&raw_path))?;
            if let Some(parent) = source.parent() {
                make_dirs_inside(dest, parent)?;
            }
            remove_existing(&target)?;
            fs::hard_link(dest.join(source), &target)?;
        } else {
            remove_existing(&target)?;
            entry.unpack(&target)?;
        }
        written += 1;
    }
    for (dir, mode) in dir_modes.into_iter().rev() {
        // A later entry may have put a symlink where the folder was (or on
        // the way to it): chmod would follow it out of `dest`.
        if is_folder_inside(dest, &dir)? {
            fs::set_permissions(dest.join(&dir), fs::Permissions::from_mode(mode | 0o700))?;
        }
    }
    Ok(written)
}

/// Whether `dest/relative` is a folder reached through folders only, no
/// symlink on the way.
fn is_folder_inside(dest: &Path, relative: &Path) -> io::Result<bool> {
    let mut current = dest.to_path_buf();
    for component in relative.components() {
        current.push(component);
        match fs::symlink_metadata(&current) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

fn escape_error(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("archive entry {} escapes the destination", path.display()),
    )
}

/// Creates `dest/relative` folder by folder, refusing to pass through a
/// symlink, so no entry can be written outside `dest` by way of a link an
/// earlier entry planted.
fn make_dirs_inside(dest: &Path, relative: &Path) -> io::Result<()> {
    let mut current = dest.to_path_buf();
    for component in relative.components() {
        current.push(component);
        match fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "archive entry would be written through the symlink {}",
                        current.display()
                    ),
                ))
            }
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                fs::remove_file(&current)?;
                fs::create_dir(&current)?;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => fs::create_dir(&current)?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Replaces, never follows, whatever is at `target`.
fn remove_existing(target: &Path) -> io::Result<()> {
    match fs::symlink_metadata(target) {
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(target),
        Ok(_) => fs::remove_file(target),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Drops the first path component; `None` for anything with `..`, a root or
/// a prefix in it.
fn strip_top(path: &Path) -> Option<PathBuf> {
    let mut components = path.components().filter(|c| !matches!(c, Component::CurDir));
    components.next()?;
    let mut out = PathBuf::new();
    for component in components {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn pack_then_unpack_round_trips_a_tree() {
        let src = tempfile::tempdir().unwrap();
        fs::create_dir_all(src.path().join("a/b")).unwrap();
        fs::write(src.path().join("a/b/file.txt"), "hello").unwrap();
        fs::write(src.path().join("run.sh"), "#!/bin/sh\n").unwrap();
        fs::set_permissions(src.path().join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        symlink("a/b/file.txt", src.path().join("link")).unwrap();

        let tar = pack_dir(src.path(), "project", 1000, 1000, Vec::new()).unwrap();
        let dest = tempfile::tempdir().unwrap();
        let out = dest.path().join("out");
        unpack_stripped(&tar[..], &out).unwrap();

        assert_eq!(fs::read_to_string(out.join("a/b/file.txt")).unwrap(), "hello");
        assert_eq!(
            fs::metadata(out.join("run.sh")).unwrap().permissions().mode() & 0o777,
            0o755
        );
        assert_eq!(
            fs::read_link(out.join("link")).unwrap(),
            PathBuf::from("a/b/file.txt")
        );
    }

    #[test]
    fn entries_that_escape_are_refused() {
        let mut builder = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_size(1);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        // Write a raw "project/../../evil" path, which append_data would refuse.
        let name = b"project/../../evil";
        header.as_old_mut().name[..name.len()].copy_from_slice(name);
        header.set_cksum();
        builder.append(&header, &b"x"[..]).unwrap();
        let tar = builder.into_inner().unwrap();
        let dest = tempfile::tempdir().unwrap();
        let err = unpack_stripped(&tar[..], &dest.path().join("out")).unwrap_err();
        assert!(err.to_string().contains("escapes"), "{err}");
        assert!(!dest.path().join("evil").exists());
    }

    #[test]
    fn a_folders_mode_never_reaches_through_a_symlink_that_replaced_it() {
        let outside = tempfile::tempdir().unwrap();
        fs::set_permissions(outside.path(), fs::Permissions::from_mode(0o750)).unwrap();
        let mut builder = tar::Builder::new(Vec::new());
        let mut dir = tar::Header::new_gnu();
        dir.set_entry_type(tar::EntryType::Directory);
        dir.set_size(0);
        dir.set_mode(0o777);
        builder.append_data(&mut dir, "project/d/", &b""[..]).unwrap();
        // A later entry replaces the folder with a link out of the tree.
        let mut link = tar::Header::new_gnu();
        link.set_entry_type(tar::EntryType::Symlink);
        link.set_size(0);
        link.set_mode(0o777);
        builder
            .append_link(&mut link, "project/d", outside.path())
            .unwrap();
        let tar = builder.into_inner().unwrap();
        let dest = tempfile::tempdir().unwrap();
        unpack_stripped(&tar[..], &dest.path().join("out")).unwrap();
        let mode = fs::metadata(outside.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o750, "the folder outside kept its mode");
        assert!(fs::symlink_metadata(dest.path().join("out/d"))
            .unwrap()
            .file_type()
            .is_symlink());
    }

    #[test]
    fn a_symlink_out_of_the_tree_is_not_written_through() {
        let outside = tempfile::tempdir().unwrap();
        let mut builder = tar::Builder::new(Vec::new());
        let mut link = tar::Header::new_gnu();
        link.set_entry_type(tar::EntryType::Symlink);
        link.set_size(0);
        link.set_mode(0o777);
        builder
            .append_link(&mut link, "project/escape", outside.path())
            .unwrap();
        let mut file = tar::Header::new_gnu();
        file.set_entry_type(tar::EntryType::Regular);
        file.set_size(3);
        file.set_mode(0o644);
        builder
            .append_data(&mut file, "project/escape/pwned", &b"bad"[..])
            .unwrap();
        let tar = builder.into_inner().unwrap();
        let dest = tempfile::tempdir().unwrap();
        assert!(unpack_stripped(&tar[..], &dest.path().join("out")).is_err());
        assert!(!outside.path().join("pwned").exists());
    }
}
