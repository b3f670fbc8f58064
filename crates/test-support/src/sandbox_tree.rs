//! A sandbox folder read out as data (the way the product reads one), for
//! tests to look at: paths with their contents, modes and links.

use forgehand::sandbox::tree_out::read_tree;
use forgehand::sandbox::{Sandbox, SandboxError};
use std::collections::BTreeMap;
use std::io::Read;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    File {
        bytes: Vec<u8>,
        mode: u32,
    },
    Link(String),
    Dir,
    /// A FIFO, a device, a hard link: its tar entry type.
    Other(String),
}

/// The folder's entries by path relative to it.
#[derive(Debug, Default)]
pub struct Tree(pub BTreeMap<String, Node>);

impl Tree {
    pub fn text(&self, path: &str) -> String {
        match self.0.get(path) {
            Some(Node::File { bytes, .. }) => String::from_utf8_lossy(bytes).into_owned(),
            other => panic!("{path} is no file: {other:?}"),
        }
    }

    pub fn bytes(&self, path: &str) -> &[u8] {
        match self.0.get(path) {
            Some(Node::File { bytes, .. }) => bytes,
            other => panic!("{path} is no file: {other:?}"),
        }
    }

    pub fn mode(&self, path: &str) -> u32 {
        match self.0.get(path) {
            Some(Node::File { mode, .. }) => *mode,
            other => panic!("{path} is no file: {other:?}"),
        }
    }

    pub fn link(&self, path: &str) -> String {
        match self.0.get(path) {
            Some(Node::Link(target)) => target.clone(),
            other => panic!("{path} is no link: {other:?}"),
        }
    }

    pub fn is_dir(&self, path: &str) -> bool {
        self.0.get(path) == Some(&Node::Dir)
    }
}

/// Reads `dir` out of `sandbox` into memory.
pub async fn read(sandbox: &dyn Sandbox, dir: &str) -> Result<Tree, SandboxError> {
    let stream = sandbox.read_out(dir).await?;
    let read = read_tree(stream, |input| parse(input)).await?;
    read.sandbox?;
    Ok(read.read.expect("a well-formed tar from the sandbox"))
}

fn parse(input: &mut dyn Read) -> std::io::Result<Tree> {
    let mut tree = Tree::default();
    let mut archive = tar::Archive::new(input);
    for entry in archive.entries()? {
        let mut entry = entry?;
        let path = entry.path()?.to_string_lossy().into_owned();
        // Drop the folder's own name.
        let Some((_, relative)) = path.trim_end_matches('/').split_once('/') else {
            continue;
        };
        let relative = relative.to_owned();
        let header = entry.header().clone();
        let node = match header.entry_type() {
            tar::EntryType::Regular => {
                let mut bytes = Vec::new();
                entry.read_to_end(&mut bytes)?;
                Node::File {
                    bytes,
                    mode: header.mode()? & 0o7777,
                }
            }
            tar::EntryType::Symlink => Node::Link(
                header
                    .link_name()?
                    .map(|l| l.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            ),
            tar::EntryType::Directory => Node::Dir,
            other => Node::Other(format!("{other:?}")),
        };
        tree.0.insert(relative, node);
    }
    Ok(tree)
}
