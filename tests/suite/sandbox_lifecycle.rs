//! Sandbox lifecycle: labels, the reaper, and every way it can go wrong.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support as common;
use forgehand_test_support::sandbox_tree;

use forgehand::config::DockerConfig;
use forgehand::sandbox::docker::connect;
use forgehand::sandbox::{labels, SandboxBackend, SandboxError};
use std::collections::HashMap;
use std::time::Duration;

#[tokio::test]
async fn containers_carry_labels_that_find_them_again() {
    let (backend, instance) = common::backend().await;
    common::ensure_images().await;
    let spec = common::spec(&common::base_image());
    let sandbox = backend.prepare(&spec, None).await.unwrap();
    let info = backend
        .docker()
        .inspect_container(sandbox.id(), None)
        .await
        .unwrap();
    let found = info.config.unwrap().labels.unwrap();
    assert_eq!(found.get(labels::MANAGED).map(String::as_str), Some("true"));
    assert_eq!(found.get(labels::INSTANCE), Some(&instance));
    assert_eq!(found.get(labels::TASK), Some(&spec.task_id));
    assert_eq!(found.get(labels::FORGE).map(String::as_str), Some("local"));
    assert_eq!(
        found.get(labels::REPOSITORY).map(String::as_str),
        Some("tests/forgehand")
    );
    sandbox.remove().await.unwrap();
    sandbox.remove().await.expect("removing twice is fine");
    assert!(
        common::containers_with_label(backend.docker(), labels::TASK, &spec.task_id)
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn a_second_prepare_of_the_same_task_replaces_the_first() {
    let (backend, _) = common::backend().await;
    common::ensure_images().await;
    let spec = common::spec(&common::base_image());
    let first = backend.prepare(&spec, None).await.unwrap();
    let second = backend.prepare(&spec, None).await.unwrap();
    assert_ne!(first.id(), second.id());
    let ids = common::containers_with_label(backend.docker(), labels::TASK, &spec.task_id).await;
    assert_eq!(ids, vec![second.id().to_owned()], "exactly one sandbox per task");
    second.remove().await.unwrap();
}

#[tokio::test]
async fn the_reaper_removes_orphans_of_its_instance_only() {
    use bollard::models::ContainerCreateBody;
    let (backend, instance) = common::backend().await;
    let (other_backend, _) = common::backend().await;
    common::ensure_images().await;
    let running = backend
        .prepare(&common::spec(&common::base_image()), None)
        .await
        .unwrap();
    let running_task = common::containers_with_label(backend.docker(), labels::INSTANCE, &instance).await;
    assert_eq!(running_task.len(), 1);
    let orphan_spec = common::spec(&common::base_image());
    let orphan = backend.prepare(&orphan_spec, None).await.unwrap();
    let other_instance = other_backend
        .prepare(&common::spec(&common::base_image()), None)
        .await
        .unwrap();
    // An unlabelled container that is none of forgehand's business.
    let docker = backend.docker();
    // Named so the test script's cleanup finds it should this test fail.
    let stranger_name = common::unique("forgehand-test-stranger");
    let stranger_options = bollard::query_parameters::CreateContainerOptionsBuilder::default()
        .name(&stranger_name)
        .build();
    let stranger = docker
        .create_container(
            Some(stranger_options),
            ContainerCreateBody {
                image: Some(common::base_image()),
                cmd: Some(vec!["sleep".into(), "60".into()]),
                labels: Some(HashMap::from([(
                    "purpose".to_owned(),
                    common::unique("test-stranger"),
                )])),
                host_config: Some(bollard::models::HostConfig {
                    network_mode: Some("none".into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
        )
        .await
        .unwrap();

    let running_task_id = {
        let info = docker.inspect_container(running.id(), None).await.unwrap();
        info.config.unwrap().labels.unwrap()[labels::TASK].clone()
    };
    let removed = backend
        .reap(std::slice::from_ref(&running_task_id))
        .await
        .unwrap();
    assert_eq!(removed, vec![orphan.id().to_owned()]);
    assert!(
        docker.inspect_container(orphan.id(), None).await.is_err(),
        "orphan removed"
    );
    assert!(
        docker.inspect_container(running.id(), None).await.is_ok(),
        "running task kept"
    );
    assert!(
        docker.inspect_container(other_instance.id(), None).await.is_ok(),
        "other instance kept"
    );
    assert!(
        docker.inspect_container(&stranger.id, None).await.is_ok(),
        "unlabelled kept"
    );

    running.remove().await.unwrap();
    other_instance.remove().await.unwrap();
    let options = bollard::query_parameters::RemoveContainerOptionsBuilder::default()
        .force(true)
        .build();
    docker
        .remove_container(&stranger.id, Some(options))
        .await
        .unwrap();
}

#[tokio::test]
async fn an_unreachable_docker_is_a_clear_error() {
    let config = DockerConfig {
        host: Some("unix:///nonexistent/docker.sock".into()),
        api_timeout: Duration::from_secs(5),
    };
    let err = connect(&config).await.expect_err("must fail");
    assert!(matches!(err, SandboxError::Unreachable { .. }));
    assert!(err.is_retryable());
    let text = err.to_string();
    assert!(
        text.contains("/nonexistent/docker.sock") && text.contains("dockerd"),
        "{text}"
    );
}

#[tokio::test]
async fn a_missing_image_is_a_clear_error_and_leaves_nothing_behind() {
    let (backend, instance) = common::backend().await;
    let spec = common::spec("forgehand/no-such-image:never");
    let err = backend.prepare(&spec, None).await.err().expect("must fail");
    assert!(matches!(err, SandboxError::ImageMissing { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("forgehand/no-such-image:never") && text.contains("images build"),
        "{text}"
    );
    assert!(
        common::containers_with_label(backend.docker(), labels::INSTANCE, &instance)
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn a_copy_in_of_a_missing_path_is_a_clear_error_and_leaves_nothing_behind() {
    let (backend, instance) = common::backend().await;
    common::ensure_images().await;
    let spec = common::spec(&common::base_image());
    let err = backend
        .prepare(&spec, Some(std::path::Path::new("/nonexistent/workspace")))
        .await
        .err()
        .expect("must fail");
    assert!(matches!(err, SandboxError::CopyInSource { .. }), "{err}");
    assert!(err.to_string().contains("/nonexistent/workspace"), "{err}");
    assert!(
        common::containers_with_label(backend.docker(), labels::INSTANCE, &instance)
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn a_container_that_died_under_us_is_reported_as_gone() {
    let (backend, _) = common::backend().await;
    let sandbox = common::base_sandbox(&backend, None).await;
    assert!(sandbox
        .exec("echo work > /workspace/project/done.txt", None)
        .await
        .unwrap()
        .success());
    backend.docker().kill_container(sandbox.id(), None).await.unwrap();
    let err = sandbox
        .exec("true", None)
        .await
        .expect_err("exec on a dead container fails");
    assert!(matches!(err, SandboxError::Gone { .. }), "{err}");
    assert!(err.to_string().contains("no longer running"), "{err}");
    // The work is still recoverable: the workspace volume outlives the process.
    let rescued = sandbox_tree::read(sandbox.as_ref(), "/workspace/project")
        .await
        .unwrap();
    assert_eq!(rescued.text("done.txt"), "work\n");
    sandbox.remove().await.unwrap();
    let err = sandbox
        .exec("true", None)
        .await
        .expect_err("exec on a removed container fails");
    assert!(matches!(err, SandboxError::Gone { .. }), "{err}");
}

#[tokio::test]
async fn two_daemons_with_one_instance_id_never_take_each_others_sandboxes() {
    use forgehand::sandbox::docker::DockerBackend;
    let instance = common::unique("test-shared");
    let docker = common::docker().await;
    let config = common::shipped_config().sandbox;
    let first =
        DockerBackend::new(docker.clone(), config.clone(), instance.clone()).owned_by("fh-00000000aa");
    let second = DockerBackend::new(docker.clone(), config, instance.clone()).owned_by("fh-00000000bb");
    common::ensure_images().await;
    first.check_instance_is_free().await.unwrap();
    let sandbox = first
        .prepare(&common::spec(&common::base_image()), None)
        .await
        .unwrap();
    // To the second daemon this is a sandbox of its instance that none of
    // its tasks runs: it is still not the second daemon's to reap.
    assert!(second.reap(&[]).await.unwrap().is_empty());
    assert!(docker.inspect_container(sandbox.id(), None).await.is_ok());
    let message = second.check_instance_is_free().await.unwrap_err().to_string();
    assert!(
        message.contains(&instance)
            && message.contains("fh-00000000aa")
            && message.contains("daemon.instance_id"),
        "{message}"
    );
    assert_eq!(first.reap(&[]).await.unwrap(), vec![sandbox.id().to_owned()]);
    second.check_instance_is_free().await.unwrap();
}
