//! Tar streams for moving trees into a sandbox through the archive API (no
//! bind mounts, so the same code serves every backend), packed from disk.
//! What comes out of a sandbox is never unpacked on the host: it is read as
//! data (`sandbox::tree_out`, `git::untrusted`).

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Writes a tar of `src_dir`'s contents under the top-level folder `top` into
/// `out`. Every entry is owned by `uid:gid` (the sandbox user), modes and
/// mtimes are kept, symlinks are stored as symlinks.
pub fn pack_dir<W: Write>(src_dir: &Path, top: &str, uid: u64, gid: u64, out: W) -> io::Result<W> {
    pack_dir_with(src_dir, top, (uid, gid), &[], out)
}

/// [`pack_dir`], then `replaced` files (paths relative to `top`, mode
/// 0644) after everything else: unpacked in order, they take the place of
/// the folder's own files of the same name.
pub fn pack_dir_with<W: Write>(
    src_dir: &Path,
    top: &str,
    (uid, gid): (u64, u64),
    replaced: &[(String, Vec<u8>)],
    out: W,
) -> io::Result<W> {
    let mut builder = tar::Builder::new(out);
    builder.follow_symlinks(false);
    let top = PathBuf::from(top);
    append_entry(&mut builder, src_dir, &top, uid, gid)?;
    append_children(&mut builder, src_dir, &top, uid, gid)?;
    for (relative, contents) in replaced {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(contents.len() as u64);
        header.set_mode(0o644);
        header.set_uid(uid);
        header.set_gid(gid);
        header.set_mtime(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        );
        builder.append_data(&mut header, top.join(relative), contents.as_slice())?;
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::fs::{symlink, PermissionsExt};

    #[test]
    fn replaced_files_come_after_the_folders_own_so_they_win() {
        let src = tempfile::tempdir().unwrap();
        fs::create_dir_all(src.path().join(".git/objects/info")).unwrap();
        fs::write(
            src.path().join(".git/objects/info/alternates"),
            "/host/mirror/objects\n",
        )
        .unwrap();
        let replaced = [(
            ".git/objects/info/alternates".to_owned(),
            b"/workspace/history.git/objects\n".to_vec(),
        )];
        let tar = pack_dir_with(src.path(), "project", (1000, 1000), &replaced, Vec::new()).unwrap();
        let mut archive = tar::Archive::new(&tar[..]);
        let mut named = Vec::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            if entry.path().unwrap().ends_with("alternates") {
                let mut text = String::new();
                entry.read_to_string(&mut text).unwrap();
                assert_eq!(entry.header().uid().unwrap(), 1000);
                named.push(text);
            }
        }
        // Unpacked in order, the last one is what the sandbox reads.
        assert_eq!(
            named,
            ["/host/mirror/objects\n", "/workspace/history.git/objects\n"]
        );
    }

    #[test]
    fn a_packed_tree_holds_files_modes_and_links_as_links() {
        let src = tempfile::tempdir().unwrap();
        fs::create_dir_all(src.path().join("a/b")).unwrap();
        fs::write(src.path().join("a/b/file.txt"), "hello").unwrap();
        fs::write(src.path().join("run.sh"), "#!/bin/sh\n").unwrap();
        fs::set_permissions(src.path().join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        symlink("a/b/file.txt", src.path().join("link")).unwrap();

        let tar = pack_dir(src.path(), "project", 1000, 1000, Vec::new()).unwrap();
        let mut archive = tar::Archive::new(&tar[..]);
        let mut seen = Vec::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let path = entry.path().unwrap().display().to_string();
            let header = entry.header().clone();
            assert_eq!(header.uid().unwrap(), 1000);
            let mut text = String::new();
            entry.read_to_string(&mut text).unwrap();
            let link = header.link_name().unwrap().map(|l| l.display().to_string());
            seen.push((path, header.mode().unwrap() & 0o777, text, link));
        }
        let find = |name: &str| seen.iter().find(|(p, ..)| p == name).cloned().unwrap();
        assert_eq!(find("project/a/b/file.txt").2, "hello");
        assert_eq!(find("project/run.sh").1, 0o755);
        assert_eq!(find("project/link").3.as_deref(), Some("a/b/file.txt"));
    }
}
