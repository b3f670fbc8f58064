//! `forgehand images build`: builds each image (its built-in Dockerfile, or
//! the operator's folder for it) through the Docker API, streaming the
//! build's output to a progress callback.

use super::{catalog, image_tag, ImageSource};
use crate::config::ImagesConfig;
use crate::sandbox::helper::{self, EditorBinary};
use crate::sandbox::SandboxError;
use bollard::query_parameters::BuildImageOptionsBuilder;
use bollard::Docker;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("no image named {name:?}; known images: {known} (add one as <images.dir>/{name}/Dockerfile)")]
    Unknown { name: String, known: String },
    #[error("cannot read the image folder {dir}: {source}; set images.dir in config.yaml")]
    Folder {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("building image {tag} failed: {message}")]
    BuildFailed { tag: String, message: String },
    #[error(transparent)]
    Docker(#[from] SandboxError),
}

/// How a build treats Docker's layer cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildCache {
    /// Reuse cached layers: a rebuild of an unchanged Dockerfile is instant.
    Use,
    /// Run every step again, e.g. to pick up package updates.
    Ignore,
}

/// Builds the named images (all of them when `names` is empty) and returns
/// their tags. `progress` receives every line of build output.
pub async fn build_images(
    docker: &Docker,
    config: &ImagesConfig,
    editor: &EditorBinary,
    names: &[String],
    cache: BuildCache,
    progress: &mut (dyn FnMut(&str, &str) + Send),
) -> Result<Vec<String>, ImageError> {
    let known = catalog(config).map_err(|source| ImageError::Folder {
        dir: config.dir.clone().unwrap_or_default(),
        source,
    })?;
    let selected: Vec<String> = if names.is_empty() {
        known.keys().cloned().collect()
    } else {
        names.to_vec()
    };
    let mut sources = Vec::new();
    for name in &selected {
        match known.get(name) {
            Some(source) => sources.push((name, source)),
            None => {
                return Err(ImageError::Unknown {
                    name: name.clone(),
                    known: known.keys().cloned().collect::<Vec<_>>().join(", "),
                })
            }
        }
    }
    let mut tags = Vec::new();
    for (name, source) in sources {
        tags.push(build_one(docker, config, editor, name, source, cache, progress).await?);
    }
    Ok(tags)
}

async fn build_one(
    docker: &Docker,
    config: &ImagesConfig,
    editor: &EditorBinary,
    name: &str,
    source: &ImageSource,
    cache: BuildCache,
    progress: &mut (dyn FnMut(&str, &str) + Send),
) -> Result<String, ImageError> {
    let tag = image_tag(config, name);
    let context = {
        let source = source.clone();
        let editor = editor.clone();
        let folder_error = |source: std::io::Error| ImageError::Folder {
            dir: config.dir.clone().unwrap_or_default().join(name),
            source,
        };
        tokio::task::spawn_blocking(move || build_context(&source, &editor))
            .await
            .map_err(|e| folder_error(std::io::Error::other(e)))?
            .map_err(folder_error)?
    };
    let build_args = HashMap::from([("BASE_IMAGE", config.base_image.as_str())]);
    // The sandbox backend compares this with its own editor to skip the copy.
    let labels = HashMap::from([(helper::IMAGE_LABEL, editor.sha256())]);
    let options = BuildImageOptionsBuilder::default()
        .dockerfile("Dockerfile")
        .t(&tag)
        .rm(true)
        .forcerm(true)
        .nocache(cache == BuildCache::Ignore)
        .buildargs(&build_args)
        .labels(&labels)
        .networkmode(&config.build_network)
        .build();
    progress(name, &format!("building {tag} from {}", source.describe()));
    let mut stream = docker.build_image(options, None, Some(bollard::body_full(context.into())));
    while let Some(item) = stream.next().await {
        match item {
            Ok(info) => {
                if let Some(line) = info.stream.as_deref().or(info.status.as_deref()) {
                    for line in line.lines().map(str::trim_end).filter(|l| !l.is_empty()) {
                        progress(name, line);
                    }
                }
            }
            Err(bollard::errors::Error::DockerStreamError { error }) => {
                let hint = if error.contains(&config.base_image) || error.contains("pull access denied") {
                    format!("; the base image {} must be present (run scripts/dev-env.sh, or set images.base_image)", config.base_image)
                } else {
                    String::new()
                };
                return Err(ImageError::BuildFailed {
                    tag,
                    message: format!("{error}{hint}"),
                });
            }
            Err(err) => {
                return Err(ImageError::BuildFailed {
                    tag,
                    message: err.to_string(),
                })
            }
        }
    }
    if !image_present(docker, &tag).await? {
        return Err(ImageError::BuildFailed {
            tag,
            message: "the build ended without producing the image".into(),
        });
    }
    progress(name, &format!("built {tag}"));
    Ok(tag)
}

/// The tar the engine builds from: the image's files and the static editor,
/// which every Dockerfile copies from its context.
fn build_context(source: &ImageSource, editor: &EditorBinary) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    builder.follow_symlinks(false);
    let file = |builder: &mut tar::Builder<Vec<u8>>, name: &str, mode: u32, bytes: &[u8]| {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(mode);
        header.set_entry_type(tar::EntryType::Regular);
        builder.append_data(&mut header, name, bytes)
    };
    match source {
        ImageSource::BuiltIn(dockerfile) => file(&mut builder, "Dockerfile", 0o644, dockerfile.as_bytes())?,
        ImageSource::Folder(dir) => builder.append_dir_all(".", dir)?,
    }
    file(&mut builder, helper::FILE_NAME, 0o755, editor.bytes())?;
    builder.into_inner()
}

/// Whether the engine has `image` (a tag or id).
pub async fn image_present(docker: &Docker, image: &str) -> Result<bool, SandboxError> {
    match docker.inspect_image(image).await {
        Ok(_) => Ok(true),
        Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => Ok(false),
        Err(err) => Err(SandboxError::Refused {
            engine: crate::sandbox::docker::ENGINE,
            action: format!("inspect image {image}"),
            detail: err.to_string(),
            retryable: true,
        }),
    }
}
