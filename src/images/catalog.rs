//! Which images exist and where each one's build files come from: the
//! Dockerfiles of `images/` are built into the binary, so a config anywhere
//! works; an operator's `images.dir` replaces one (`<dir>/python/Dockerfile`)
//! or adds another (`<dir>/elixir/Dockerfile`) with a whole build folder.

use crate::config::ImagesConfig;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The Dockerfiles of the checkout's `images/` folder, by image name.
const BUILT_IN: &[(&str, &str)] = &[
    ("base", include_str!("../../images/base/Dockerfile")),
    ("go", include_str!("../../images/go/Dockerfile")),
    ("java", include_str!("../../images/java/Dockerfile")),
    ("node", include_str!("../../images/node/Dockerfile")),
    ("python", include_str!("../../images/python/Dockerfile")),
    ("rust", include_str!("../../images/rust/Dockerfile")),
];

/// Where an image's build context comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageSource {
    /// The Dockerfile built into forgehand (its whole context).
    BuiltIn(&'static str),
    /// A folder of the operator's `images.dir` holding a `Dockerfile`.
    Folder(PathBuf),
}

impl ImageSource {
    /// Where the build files are, for messages.
    pub fn describe(&self) -> String {
        match self {
            ImageSource::BuiltIn(_) => "the Dockerfile built into forgehand".into(),
            ImageSource::Folder(dir) => dir.display().to_string(),
        }
    }
}

/// Every image by name: the built-in ones, replaced or joined by the
/// folders of `images.dir` that hold a Dockerfile. A configured folder that
/// cannot be read is an error, never a silent fall back to the built-ins.
pub fn catalog(config: &ImagesConfig) -> std::io::Result<BTreeMap<String, ImageSource>> {
    let mut images: BTreeMap<String, ImageSource> = BUILT_IN
        .iter()
        .map(|(name, dockerfile)| ((*name).to_owned(), ImageSource::BuiltIn(dockerfile)))
        .collect();
    let Some(dir) = &config.dir else {
        return Ok(images);
    };
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.join("Dockerfile").is_file() {
            if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
                images.insert(name.to_owned(), ImageSource::Folder(path.clone()));
            }
        }
    }
    Ok(images)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn the_built_in_list_is_the_checkouts_images_folder() {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("images");
        let mut on_disk: Vec<(String, String)> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir())
            .map(|p| {
                // Only a Dockerfile is built in: another file would be lost.
                let files: Vec<_> = std::fs::read_dir(&p)
                    .unwrap()
                    .map(|f| f.unwrap().file_name())
                    .collect();
                assert_eq!(
                    files,
                    ["Dockerfile"],
                    "{} holds more than a Dockerfile",
                    p.display()
                );
                let name = p.file_name().unwrap().to_str().unwrap().to_owned();
                (name, std::fs::read_to_string(p.join("Dockerfile")).unwrap())
            })
            .collect();
        on_disk.sort();
        let built_in: Vec<(String, String)> = BUILT_IN
            .iter()
            .map(|(n, d)| ((*n).to_owned(), (*d).to_owned()))
            .collect();
        assert_eq!(built_in, on_disk);
    }

    #[test]
    fn without_a_folder_the_built_in_images_are_used() {
        let config = Config::defaults().images;
        assert_eq!(config.dir, None);
        let images = catalog(&config).unwrap();
        assert_eq!(
            images.keys().collect::<Vec<_>>(),
            ["base", "go", "java", "node", "python", "rust"]
        );
        assert!(images.values().all(|s| matches!(s, ImageSource::BuiltIn(_))));
    }

    #[test]
    fn a_folder_replaces_one_image_and_adds_another() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["python", "elixir", "notes"] {
            std::fs::create_dir(dir.path().join(name)).unwrap();
        }
        std::fs::write(dir.path().join("python/Dockerfile"), "FROM scratch\n").unwrap();
        std::fs::write(dir.path().join("elixir/Dockerfile"), "FROM scratch\n").unwrap();
        let mut config = Config::defaults().images;
        config.dir = Some(dir.path().to_owned());
        let images = catalog(&config).unwrap();
        assert_eq!(images["python"], ImageSource::Folder(dir.path().join("python")));
        assert_eq!(images["elixir"], ImageSource::Folder(dir.path().join("elixir")));
        assert!(matches!(images["go"], ImageSource::BuiltIn(_)));
        assert!(
            !images.contains_key("notes"),
            "a folder without a Dockerfile is no image"
        );
    }

    #[test]
    fn a_configured_folder_that_is_missing_is_an_error() {
        let mut config = Config::defaults().images;
        config.dir = Some(PathBuf::from("/nonexistent/forgehand-images"));
        assert!(catalog(&config).is_err());
    }
}
