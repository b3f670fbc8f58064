//! Reading one tar stream from a sandbox, entry by entry, into a
//! quarantine repository: object files become objects, refs are read as
//! text, work-tree files become blobs. An entry's name is only ever
//! compared with the names wanted; nothing is looked up on the host by it.

use super::{git, Limits, UntrustedError, MAX_REF_FILE_BYTES};
use git2::{ObjectType, Oid, Repository};
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Read, Write};
use std::rc::Rc;

/// What the stream's top folder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// The project's `.git` folder alone: its contents are git's.
    GitDir,
    /// The project folder: `.git` and the work tree beside it.
    Project,
}

/// A file of the work tree, already a blob in the quarantine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WorkFile {
    Blob {
        oid: Oid,
        executable: bool,
    },
    /// A symbolic link: the blob holds its target's text.
    Link(Oid),
}

/// The work tree the stream held, by path (bytes, as git keeps them).
#[derive(Debug, Default)]
pub(super) struct WorkTree {
    pub files: BTreeMap<Vec<u8>, WorkFile>,
    pub dirs: BTreeSet<Vec<u8>>,
    /// Folders that hold a `.git` of their own (submodules, nested clones).
    pub nested: BTreeSet<Vec<u8>>,
}

/// HEAD and the local branches, as the stream's ref files said.
#[derive(Debug, Default)]
pub(super) struct Refs {
    head: Option<String>,
    packed: Vec<(String, Oid)>,
    loose: Vec<(String, Oid)>,
    /// Loose refs win over packed ones, as git reads them.
    pub branches: Vec<(String, Oid)>,
}

impl Refs {
    /// The tip of `branch`, which HEAD must name.
    pub fn branch_tip(&self, branch: &str) -> Result<Oid, UntrustedError> {
        let head = self
            .head
            .as_deref()
            .ok_or_else(|| UntrustedError::Refused("it sent no HEAD file".into()))?;
        let wanted = format!("refs/heads/{branch}");
        match head.trim().strip_prefix("ref: ") {
            Some(name) if name == wanted => {}
            // Only a name git itself would take is repeated, never HEAD's text.
            Some(name) if name.len() <= 200 && git2::Reference::is_valid_name(name) => {
                return Err(UntrustedError::OtherHead {
                    head: name.to_owned(),
                })
            }
            Some(_) => {
                return Err(UntrustedError::OtherHead {
                    head: "(no valid ref name)".into(),
                })
            }
            None => {
                return Err(UntrustedError::OtherHead {
                    head: "(detached)".into(),
                })
            }
        }
        self.branches
            .iter()
            .find(|(name, _)| name == branch)
            .map(|(_, oid)| *oid)
            .ok_or_else(|| UntrustedError::Refused(format!("the branch `{branch}` has no commit")))
    }

    fn settle(&mut self) {
        let mut branches: BTreeMap<String, Oid> = std::mem::take(&mut self.packed).into_iter().collect();
        branches.extend(self.loose.drain(..));
        self.branches = branches.into_iter().collect();
    }
}

/// What one stream held.
pub(super) struct Intake {
    pub refs: Refs,
    /// `None` with [`Layout::GitDir`].
    pub tree: Option<WorkTree>,
    pub left_out: Vec<String>,
}

/// Counts what the tar reader takes from the stream and stops it at the cap.
pub(crate) struct Capped<R> {
    inner: R,
    read: Rc<Cell<u64>>,
    cap: u64,
    hit: Rc<Cell<bool>>,
}

impl<R> Capped<R> {
    /// `inner` stopped after `cap` bytes; with the count of bytes read and
    /// whether the cap stopped a read.
    pub(crate) fn new(inner: R, cap: u64) -> (Capped<R>, Rc<Cell<u64>>, Rc<Cell<bool>>) {
        let (read, hit) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(false)));
        let capped = Capped {
            inner,
            read: read.clone(),
            cap,
            hit: hit.clone(),
        };
        (capped, read, hit)
    }
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let room = self.cap.saturating_sub(self.read.get());
        if room == 0 {
            self.hit.set(true);
            return Err(io::Error::other("the copy-out cap was reached"));
        }
        let want = buf.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

struct Reader<'r> {
    repo: &'r Repository,
    limits: &'r Limits,
    read: Rc<Cell<u64>>,
    hit: Rc<Cell<bool>>,
    /// Bytes of objects inflated so far (a small object file can inflate to
    /// a great deal).
    inflated: u64,
    refs: Refs,
    tree: WorkTree,
    left_out: Vec<String>,
}

/// Reads `input` (a tar whose first path component is the copied folder)
/// into `repo`.
pub(super) fn read(
    input: impl Read,
    layout: Layout,
    repo: &Repository,
    limits: &Limits,
) -> Result<Intake, UntrustedError> {
    let read = Rc::new(Cell::new(0));
    let hit = Rc::new(Cell::new(false));
    let capped = Capped {
        inner: input,
        read: read.clone(),
        cap: limits.bytes,
        hit: hit.clone(),
    };
    let mut reader = Reader {
        repo,
        limits,
        read,
        hit,
        inflated: 0,
        refs: Refs::default(),
        tree: WorkTree::default(),
        left_out: Vec::new(),
    };
    let mut archive = tar::Archive::new(capped);
    let entries = archive.entries().map_err(|e| reader.stream_error(e))?;
    let mut count = 0u64;
    for entry in entries {
        let entry = entry.map_err(|e| reader.stream_error(e))?;
        count += 1;
        if count > limits.entries {
            return Err(UntrustedError::TooLarge {
                what: format!("{} entries", limits.entries),
            });
        }
        reader.entry(entry, layout)?;
    }
    reader.refs.settle();
    Ok(Intake {
        refs: reader.refs,
        tree: (layout == Layout::Project).then_some(reader.tree),
        left_out: reader.left_out,
    })
}

/// Where an entry belongs.
enum Place {
    /// The copied folder itself.
    Top,
    Git(String),
    Work(Vec<u8>),
    /// Inside a `.git` of a folder of the work tree.
    Nested(Vec<u8>),
}

impl Reader<'_> {
    fn too_large_bytes(&self) -> UntrustedError {
        UntrustedError::TooLarge {
            what: format!("{} bytes", self.limits.bytes),
        }
    }

    fn stream_error(&self, e: io::Error) -> UntrustedError {
        if self.hit.get() {
            self.too_large_bytes()
        } else {
            UntrustedError::Stream(e)
        }
    }

    fn entry<R: Read>(&mut self, mut entry: tar::Entry<'_, R>, layout: Layout) -> Result<(), UntrustedError> {
        let size = entry.size();
        // Refused at the header: a sparse terabyte is never read.
        if size > self.limits.bytes.saturating_sub(self.read.get()) {
            return Err(self.too_large_bytes());
        }
        let raw = entry.path_bytes().into_owned();
        let link_length = entry.link_name_bytes().map_or(0, |l| l.len());
        if raw.len() > MAX_NAME_BYTES || link_length > MAX_NAME_BYTES {
            return Err(UntrustedError::TooLarge {
                what: format!("{MAX_NAME_BYTES} bytes in one entry's name or link target"),
            });
        }
        let place = self.place(&raw, layout)?;
        let kind = entry.header().entry_type();
        let result = match place {
            Place::Top => Ok(()),
            Place::Nested(folder) => {
                self.tree.nested.insert(folder);
                Ok(())
            }
            Place::Git(path) => match kind {
                tar::EntryType::Regular | tar::EntryType::Continuous => self.git_file(&path, &mut entry),
                // A link, a folder or anything else in `.git` is never followed.
                _ => Ok(()),
            },
            Place::Work(path) => self.work_entry(path, kind, &mut entry, layout),
        };
        result.map_err(|e| match e {
            UntrustedError::Stream(io) => self.stream_error(io),
            other => other,
        })
    }

    fn place(&self, raw: &[u8], layout: Layout) -> Result<Place, UntrustedError> {
        let mut parts: Vec<&[u8]> = Vec::new();
        for part in raw.split(|b| *b == b'/') {
            match part {
                b"" | b"." => {}
                // The name itself is the sandbox's text: never repeated.
                b".." => {
                    return Err(UntrustedError::Refused(
                        "an entry's name leaves the copied folder (it holds `..`)".into(),
                    ))
                }
                part => parts.push(part),
            }
        }
        if parts.len() > self.limits.depth + 1 {
            return Err(UntrustedError::TooLarge {
                what: format!("{} folders deep", self.limits.depth),
            });
        }
        // The first component is the copied folder's own name.
        let inner = parts.get(1..).unwrap_or_default();
        if inner.is_empty() {
            return Ok(Place::Top);
        }
        let git_at = match layout {
            Layout::GitDir => Some(0),
            Layout::Project => inner.iter().position(|p| *p == b".git"),
        };
        Ok(match (layout, git_at) {
            (Layout::GitDir, _) => Place::Git(String::from_utf8_lossy(&inner.join(&b'/')).into_owned()),
            (Layout::Project, Some(0)) => match inner.get(1..) {
                Some(rest) if !rest.is_empty() => {
                    Place::Git(String::from_utf8_lossy(&rest.join(&b'/')).into_owned())
                }
                _ => Place::Top,
            },
            (Layout::Project, Some(at)) => Place::Nested(inner[..at].join(&b'/')),
            (Layout::Project, None) => Place::Work(inner.join(&b'/')),
        })
    }

    fn git_file(&mut self, path: &str, entry: &mut impl Read) -> Result<(), UntrustedError> {
        if path == "HEAD" {
            self.refs.head = Some(read_small(entry, path)?);
        } else if path == "packed-refs" {
            for line in read_small(entry, path)?.lines() {
                if let Some((oid, name)) = line.split_once(' ') {
                    let valid = git2::Reference::is_valid_name(name);
                    if let (Some(branch), Ok(oid), true) =
                        (name.strip_prefix("refs/heads/"), Oid::from_str(oid), valid)
                    {
                        self.refs.packed.push((branch.to_owned(), oid));
                    }
                }
            }
        } else if let Some(name) = path.strip_prefix("refs/heads/") {
            if git2::Reference::is_valid_name(path) {
                if let Ok(oid) = Oid::from_str(read_small(entry, path)?.trim()) {
                    self.refs.loose.push((name.to_owned(), oid));
                }
            }
        } else if let Some(object) = path.strip_prefix("objects/") {
            match object.split_once('/') {
                Some((fan, rest))
                    if fan.len() == 2
                        && rest.len() == 38
                        && fan.chars().chain(rest.chars()).all(|c| c.is_ascii_hexdigit()) =>
                {
                    self.loose_object(entry)?;
                }
                Some(("pack", file)) if file.starts_with("pack-") && file.ends_with(".pack") => {
                    self.pack(entry)?;
                }
                // Index files are made again; `info/alternates` and the rest are never read.
                _ => {}
            }
        }
        Ok(())
    }

    /// A loose object: inflated, its header read, its content written to
    /// the quarantine, which names it by its own hash.
    fn loose_object(&mut self, entry: &mut impl Read) -> Result<(), UntrustedError> {
        let mut inflate = flate2::read::ZlibDecoder::new(entry);
        let mut header = Vec::new();
        let mut byte = [0u8; 1];
        loop {
            inflate.read_exact(&mut byte).map_err(UntrustedError::Stream)?;
            if byte[0] == 0 {
                break;
            }
            header.push(byte[0]);
            if header.len() > 32 {
                return Err(UntrustedError::Refused("a loose object has no header".into()));
            }
        }
        let header = String::from_utf8_lossy(&header).into_owned();
        let (kind, size) = header
            .split_once(' ')
            .and_then(|(kind, size)| Some((ObjectType::from_str(kind)?, size.parse::<u64>().ok()?)))
            .filter(|(kind, _)| {
                matches!(
                    kind,
                    ObjectType::Blob | ObjectType::Tree | ObjectType::Commit | ObjectType::Tag
                )
            })
            .ok_or_else(|| {
                UntrustedError::Refused(format!("a loose object's header `{header}` is not git's"))
            })?;
        self.inflated += size;
        if self.inflated > self.limits.bytes {
            return Err(UntrustedError::TooLarge {
                what: format!("{} bytes of objects", self.limits.bytes),
            });
        }
        let odb = self.repo.odb().map_err(git("open the quarantine's objects"))?;
        let length = usize::try_from(size)
            .map_err(|_| UntrustedError::Refused("a loose object is too large".into()))?;
        let mut writer = odb.writer(length, kind).map_err(git("store an object"))?;
        let copied = io::copy(&mut (&mut inflate).take(size), &mut writer).map_err(UntrustedError::Stream)?;
        if copied != size {
            return Err(UntrustedError::Refused(
                "a loose object is shorter than its header says".into(),
            ));
        }
        writer.finalize().map_err(git("store an object"))?;
        Ok(())
    }

    /// A pack: indexed by libgit2 as it streams in, which checks it whole.
    fn pack(&mut self, entry: &mut impl Read) -> Result<(), UntrustedError> {
        let odb = self.repo.odb().map_err(git("open the quarantine's objects"))?;
        let mut writer = odb.packwriter().map_err(git("index a pack"))?;
        // The pack's header says how many objects it holds: a count past the
        // entry cap stops the indexer before it inflates them.
        let cap = usize::try_from(self.limits.entries).unwrap_or(usize::MAX);
        let over = Rc::new(Cell::new(false));
        let seen_over = over.clone();
        writer.progress(move |progress| {
            let fits = progress.total_objects() <= cap && progress.indexed_objects() <= cap;
            seen_over.set(seen_over.get() || !fits);
            fits
        });
        let too_many = || UntrustedError::TooLarge {
            what: format!("{} objects in one pack", self.limits.entries),
        };
        let written = io::copy(entry, &mut writer)
            .and_then(|_| writer.flush())
            .map_err(UntrustedError::Stream);
        if over.get() {
            return Err(too_many());
        }
        written?;
        let committed = writer.commit();
        if over.get() {
            return Err(too_many());
        }
        committed.map_err(git("index a pack"))?;
        Ok(())
    }

    fn work_entry<R: Read>(
        &mut self,
        path: Vec<u8>,
        kind: tar::EntryType,
        entry: &mut tar::Entry<'_, R>,
        layout: Layout,
    ) -> Result<(), UntrustedError> {
        let file = match kind {
            tar::EntryType::Directory => {
                self.tree.dirs.insert(path);
                return Ok(());
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let executable = entry.header().mode().is_ok_and(|m| m & 0o111 != 0);
                let mut writer = self.repo.blob_writer(None).map_err(git("store a file"))?;
                io::copy(entry, &mut writer).map_err(UntrustedError::Stream)?;
                WorkFile::Blob {
                    oid: writer.commit().map_err(git("store a file"))?,
                    executable,
                }
            }
            tar::EntryType::Symlink => {
                let target = entry.link_name_bytes().unwrap_or_default().into_owned();
                WorkFile::Link(self.repo.blob(&target).map_err(git("store a link"))?)
            }
            // A hard link names an earlier entry of the same stream.
            tar::EntryType::Link => {
                let target = entry.link_name_bytes().unwrap_or_default().into_owned();
                let same = match self.place(&target, layout)? {
                    Place::Work(target) => self.tree.files.get(&target).copied(),
                    _ => None,
                };
                match same {
                    Some(file) => file,
                    None => {
                        self.leave_out(&path, "a hard link to nothing else in the copy");
                        return Ok(());
                    }
                }
            }
            other => {
                self.leave_out(&path, &format!("a special file ({other:?})"));
                return Ok(());
            }
        };
        self.tree.files.insert(path, file);
        Ok(())
    }

    fn leave_out(&mut self, path: &[u8], why: &str) {
        self.left_out
            .push(format!("`{}`: {why}", String::from_utf8_lossy(path)));
    }
}

/// Longest entry name or link target taken (the tar reader has already
/// held it whole; it is never kept, copied or repeated).
const MAX_NAME_BYTES: usize = 4096;

/// A ref-sized file's text.
fn read_small(entry: &mut impl Read, path: &str) -> Result<String, UntrustedError> {
    let mut text = String::new();
    entry
        .take(MAX_REF_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|_| UntrustedError::Refused(format!("`.git/{path}` is not a text file")))?;
    if text.len() as u64 > MAX_REF_FILE_BYTES {
        return Err(UntrustedError::Refused(format!(
            "`.git/{path}` is larger than {MAX_REF_FILE_BYTES} bytes"
        )));
    }
    Ok(text)
}
