//! forgehand's own image (the Dockerfile's `runtime` stage, built by
//! `scripts/build-daemon-image --binaries` in the test setup from the local
//! base image, with the daemon and the static editor the setup compiled):
//! the sandbox images' Dockerfiles, the prompts and a default config that
//! loads; non-root; and every path the Kubernetes config map names is in it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support as common;

use std::process::{Command, Output};

fn image() -> String {
    std::env::var("FORGEHAND_DAEMON_IMAGE").unwrap_or_else(|_| "forgehand:latest".into())
}

/// `docker run` of the image, with no network and no secrets.
fn run(entrypoint: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = Command::new("docker");
    cmd.args(["run", "--rm", "--network", "none"]);
    if let Some(e) = entrypoint {
        cmd.args(["--entrypoint", e]);
    }
    cmd.arg(image()).args(args);
    cmd.output().unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn the_image_runs_the_daemon_as_a_non_root_user() {
    let inspect = Command::new("docker")
        .args(["image", "inspect", "-f", "{{.Config.User}}", &image()])
        .output()
        .unwrap();
    assert!(
        inspect.status.success(),
        "{} is missing; scripts/test builds it with scripts/build-daemon-image",
        image()
    );
    assert_eq!(String::from_utf8_lossy(&inspect.stdout).trim(), "10001:10001");
    let id = run(Some("id"), &["-u"]);
    assert_eq!(String::from_utf8_lossy(&id.stdout).trim(), "10001");

    let version = run(None, &["--version"]);
    assert!(version.status.success(), "{}", text(&version));
    assert!(text(&version).starts_with("forgehand "), "{}", text(&version));

    // The shipped default config loads; with nothing set it says what to set.
    let fresh = run(None, &["run"]);
    assert_eq!(fresh.status.code(), Some(2), "{}", text(&fresh));
    let said = text(&fresh);
    assert!(said.contains("github.repositories"), "{said}");
    assert!(said.contains("OPENAI_API_KEY"), "{said}");

    // The sandbox images it builds are the repository's.
    let listed = run(None, &["images", "list"]);
    assert!(listed.status.success(), "{}", text(&listed));
    for name in ["base", "python", "node", "rust", "go", "java"] {
        assert!(
            text(&listed).contains(name),
            "{name} missing from: {}",
            text(&listed)
        );
    }
}

#[test]
fn the_editor_in_the_image_is_static_and_the_config_maps_paths_exist() {
    // No program interpreter: it runs in any sandbox image, libc or not.
    let editor = run(Some("cat"), &["/usr/local/bin/forgehand-editor"]);
    assert!(editor.status.success());
    let bytes = editor.stdout;
    assert_eq!(&bytes[..4], b"\x7fELF");
    let needle = b"/lib64/ld-linux";
    assert!(
        !bytes.windows(needle.len()).any(|w| w == needle),
        "the editor is dynamically linked"
    );

    // Every absolute path the Kubernetes config map names is in the image
    // (the state folder is the mounted volume; the sandbox images'
    // Dockerfiles and the prompts are in the binary).
    let map = std::fs::read_to_string(
        common::repo_root().join("deploy/kubernetes/overlays/single-node/configmap.yaml"),
    )
    .unwrap();
    let paths: Vec<&str> = map
        .lines()
        .filter_map(|l| l.split('"').nth(1))
        .filter(|v| v.starts_with("/usr/") || v.starts_with("/var/"))
        .collect();
    assert!(paths.contains(&"/var/lib/forgehand/state"), "{paths:?}");
    for path in &paths {
        let found = run(Some("test"), &["-d", path]);
        assert!(found.status.success(), "{path} is not a folder in the image");
    }
    // The state folder belongs to the daemon's user.
    let owner = run(Some("stat"), &["-c", "%u", "/var/lib/forgehand/state"]);
    assert_eq!(String::from_utf8_lossy(&owner.stdout).trim(), "10001");
}
