//! The static `forgehand-editor` executable that every sandbox gets: it is the
//! container's idle main process and the text-editor MCP server. Images built
//! by forgehand carry it (labelled with its hash); any other image gets it
//! copied into the workspace volume before the container starts.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where forgehand's images install the editor.
pub const IMAGE_PATH: &str = "/usr/local/bin/forgehand-editor";
/// Label on an image holding the SHA-256 of the editor it carries.
pub const IMAGE_LABEL: &str = "io.forgehand.editor-sha256";
/// The executable's file name, next to `forgehand` in a release.
pub const FILE_NAME: &str = "forgehand-editor";

#[derive(Clone)]
pub struct EditorBinary {
    bytes: Arc<Vec<u8>>,
    sha256: String,
    path: PathBuf,
}

impl std::fmt::Debug for EditorBinary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EditorBinary")
            .field("path", &self.path)
            .field("sha256", &self.sha256)
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HelperError {
    #[error("cannot read the editor executable {path}: {source}; build it with scripts/build-editor and set text_editor_mcp.editor_binary")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a Linux executable (no ELF header); point text_editor_mcp.editor_binary at the output of scripts/build-editor")]
    NotExecutable { path: PathBuf },
    #[error("no forgehand-editor executable found (looked at {looked}); build it with scripts/build-editor and set text_editor_mcp.editor_binary or FORGEHAND_EDITOR_BINARY")]
    NotFound { looked: String },
}

impl EditorBinary {
    pub fn load(path: &Path) -> Result<EditorBinary, HelperError> {
        let bytes = std::fs::read(path).map_err(|source| HelperError::Read {
            path: path.to_owned(),
            source,
        })?;
        if !bytes.starts_with(b"\x7fELF") {
            return Err(HelperError::NotExecutable {
                path: path.to_owned(),
            });
        }
        let sha256 = format!("{:x}", Sha256::digest(&bytes));
        Ok(EditorBinary {
            bytes: Arc::new(bytes),
            sha256,
            path: path.to_owned(),
        })
    }

    /// The configured path, else `forgehand-editor` next to this executable.
    pub fn locate(configured: Option<&Path>) -> Result<EditorBinary, HelperError> {
        if let Some(path) = configured {
            return EditorBinary::load(path);
        }
        let sibling = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(|dir| dir.join(FILE_NAME)));
        match sibling {
            Some(path) if path.is_file() => EditorBinary::load(&path),
            other => Err(HelperError::NotFound {
                looked: other
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| "next to forgehand".into()),
            }),
        }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}
