//! Every sandbox image builds through the Docker API and its toolchain runs
//! inside a hardened sandbox.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support as common;

use forgehand::images;
use forgehand::sandbox::SandboxBackend;

#[tokio::test]
async fn every_image_builds_and_its_toolchain_runs() {
    let docker = common::docker().await;
    let config = common::shipped_config().images;
    let names = images::available_images(&config).unwrap();
    assert_eq!(names, vec!["base", "go", "java", "node", "python", "rust"]);
    let mut lines = 0usize;
    let mut progress = |_: &str, _: &str| lines += 1;
    let editor = common::editor_binary();
    let tags = images::build_images(
        &docker,
        &config,
        &editor,
        &[],
        images::BuildCache::Use,
        &mut progress,
    )
    .await
    .unwrap();
    assert!(lines > names.len(), "build progress is reported");
    assert_eq!(tags.len(), names.len());
    for tag in &tags {
        let labels = docker
            .inspect_image(tag)
            .await
            .unwrap()
            .config
            .unwrap()
            .labels
            .unwrap();
        assert_eq!(
            labels.get("io.forgehand.editor-sha256").map(String::as_str),
            Some(editor.sha256()),
            "{tag}"
        );
    }

    let (backend, _) = common::backend().await;
    let checks = [
        ("base", "git --version", "git version"),
        ("python", "python3 --version", "Python 3"),
        ("node", "node --version", "v"),
        ("go", "go version", "go version go1"),
        ("rust", "cargo --version", "cargo 1."),
        ("java", "javac -version", "javac "),
    ];
    for (name, command, expected) in checks {
        let sandbox = backend
            .prepare(&common::spec(&images::image_tag(&config, name)), None)
            .await
            .unwrap();
        let out = sandbox.exec(command, None).await.unwrap();
        sandbox.remove().await.unwrap();
        assert!(out.success(), "{name}: {command}: {out:?}");
        let text = format!("{}{}", out.stdout, out.stderr);
        assert!(text.starts_with(expected), "{name}: {command} printed {text:?}");
    }
}

#[tokio::test]
async fn building_an_unknown_image_names_the_known_ones() {
    let docker = common::docker().await;
    let config = common::shipped_config().images;
    let mut progress = |_: &str, _: &str| {};
    let err = images::build_images(
        &docker,
        &config,
        &common::editor_binary(),
        &["cobol".into()],
        images::BuildCache::Use,
        &mut progress,
    )
    .await
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("cobol") && text.contains("python") && text.contains("rust"),
        "{text}"
    );
}

#[tokio::test]
async fn images_carry_no_credentials() {
    let docker = common::docker().await;
    common::ensure_images().await;
    let config = common::shipped_config().images;
    for name in images::available_images(&config).unwrap() {
        let info = docker
            .inspect_image(&images::image_tag(&config, &name))
            .await
            .unwrap();
        let env = info.config.and_then(|c| c.env).unwrap_or_default();
        for var in env {
            let upper = var.to_uppercase();
            assert!(
                !(upper.contains("TOKEN") || upper.contains("API_KEY") || upper.contains("PASSWORD")),
                "{name} image has {var}"
            );
        }
    }
}
