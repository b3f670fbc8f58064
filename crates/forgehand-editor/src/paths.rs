//! Turning a path the model wrote into a real path inside the root.
//!
//! Each component is resolved through the filesystem, so `..` and every
//! symlink are followed the way the kernel would follow them; the result must
//! lie inside the root. A path that does not exist yet is judged by its
//! nearest existing parent.

use super::EditorError;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

#[derive(Debug, Clone)]
pub struct Root {
    canonical: PathBuf,
}

impl Root {
    pub fn new(dir: &Path) -> io::Result<Root> {
        let canonical = fs::canonicalize(dir)?;
        if !canonical.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a folder", dir.display()),
            ));
        }
        Ok(Root { canonical })
    }

    pub fn path(&self) -> &Path {
        &self.canonical
    }

    /// Resolves `raw` to a real path inside the root.
    pub fn resolve(&self, raw: &str) -> Result<PathBuf, EditorError> {
        let root = self.canonical.display();
        if raw.trim().is_empty() {
            return Err(EditorError::InvalidArguments(format!(
                "`path` is empty; give an absolute path inside {root}, e.g. {root}/README.md"
            )));
        }
        let path = Path::new(raw);
        if !path.is_absolute() {
            return Err(EditorError::InvalidArguments(format!(
                "The path {raw} is not an absolute path; it must start with \"/\". Did you mean {root}/{}?",
                raw.trim_start_matches("./")
            )));
        }
        let mut current = PathBuf::from("/");
        for component in path.components() {
            match component {
                Component::RootDir | Component::Prefix(_) | Component::CurDir => {}
                // `current` is canonical up to the first missing component,
                // and plain names after it, so popping is always right.
                Component::ParentDir => {
                    current.pop();
                }
                Component::Normal(name) => {
                    let candidate = current.join(name);
                    match fs::symlink_metadata(&candidate) {
                        Ok(meta) => {
                            current = fs::canonicalize(&candidate).map_err(|e| {
                                if meta.file_type().is_symlink() && e.kind() == io::ErrorKind::NotFound {
                                    EditorError::InvalidArguments(format!(
                                        "{} is a symbolic link whose target does not exist; the editor does not follow broken links",
                                        candidate.display()
                                    ))
                                } else {
                                    EditorError::io(&candidate, e)
                                }
                            })?;
                        }
                        Err(e) if e.kind() == io::ErrorKind::NotFound => current = candidate,
                        Err(e) => return Err(EditorError::io(&candidate, e)),
                    }
                }
            }
        }
        if current.starts_with(&self.canonical) {
            Ok(current)
        } else {
            Err(EditorError::OutsideRoot {
                path: raw.to_owned(),
                resolved: current,
                root: self.canonical.clone(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, Root, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("src")).unwrap();
        fs::write(dir.path().join("src/lib.rs"), "x").unwrap();
        fs::write(outside.path().join("secret"), "s").unwrap();
        symlink(outside.path(), dir.path().join("escape")).unwrap();
        symlink(outside.path().join("secret"), dir.path().join("secret-link")).unwrap();
        symlink("src", dir.path().join("inner-link")).unwrap();
        symlink("/nonexistent/target", dir.path().join("broken")).unwrap();
        let root = Root::new(dir.path()).unwrap();
        (dir, root, outside)
    }

    #[test]
    fn paths_inside_resolve_to_real_paths() {
        let (_dir, root, _outside) = setup();
        let base = root.path().to_owned();
        let r = |p: &str| root.resolve(&format!("{}{p}", base.display()));
        assert_eq!(r("/src/lib.rs").unwrap(), base.join("src/lib.rs"));
        assert_eq!(r("/src/../src/./lib.rs").unwrap(), base.join("src/lib.rs"));
        assert_eq!(r("/inner-link/lib.rs").unwrap(), base.join("src/lib.rs"));
        assert_eq!(r("/new/dir/file.txt").unwrap(), base.join("new/dir/file.txt"));
        assert_eq!(r("/new/../src/new.rs").unwrap(), base.join("src/new.rs"));
        assert_eq!(r("").unwrap(), base);
    }

    #[test]
    fn escapes_are_refused() {
        let (_dir, root, _outside) = setup();
        let base = root.path().display().to_string();
        for p in [
            format!("{base}/../etc/passwd"),
            format!("{base}/escape/secret"),
            format!("{base}/escape/new-file"),
            format!("{base}/secret-link"),
            format!("{base}/src/../../x"),
            format!("{base}/missing/../../x"),
            "/etc/passwd".to_owned(),
        ] {
            let err = root.resolve(&p).unwrap_err();
            assert!(matches!(err, EditorError::OutsideRoot { .. }), "{p}: {err}");
            assert!(err.to_string().contains("outside"), "{err}");
        }
    }

    #[test]
    fn relative_empty_and_broken_paths_get_guidance() {
        let (_dir, root, _outside) = setup();
        let err = root.resolve("src/lib.rs").unwrap_err().to_string();
        assert!(
            err.contains("not an absolute path") && err.contains("Did you mean"),
            "{err}"
        );
        assert!(root.resolve("  ").unwrap_err().to_string().contains("empty"));
        let broken = format!("{}/broken", root.path().display());
        assert!(root.resolve(&broken).unwrap_err().to_string().contains("broken"));
    }
}
