//! Whose sandboxes are whose on a Docker engine that several daemons share:
//! the instance id and the daemon (state folder) id on every container, the
//! reaper that removes only this daemon's orphans, and the check at start
//! that no other daemon runs under the same instance id.

use super::{docker_error, remove_container, DockerBackend};
use crate::sandbox::{labels, SandboxError};
use bollard::models::ContainerSummary;
use bollard::query_parameters::ListContainersOptionsBuilder;
use std::collections::HashMap;

impl DockerBackend {
    /// Labels every sandbox with the daemon's id (its state folder's), and
    /// reaps only sandboxes with that label.
    pub fn owned_by(mut self, daemon_id: &str) -> DockerBackend {
        self.daemon_id = Some(daemon_id.to_owned());
        self
    }

    /// Refuses to go on when another daemon's sandboxes with this instance
    /// id run on the engine: the two would take each other's containers
    /// for orphans (and their names would collide).
    pub async fn check_instance_is_free(&self) -> Result<(), SandboxError> {
        let Some(ours) = &self.daemon_id else {
            return Ok(());
        };
        for container in self.list_instance(false).await? {
            let theirs = label(&container, labels::DAEMON);
            if !theirs.is_empty() && &theirs != ours {
                let name = container
                    .names
                    .and_then(|n| n.into_iter().next())
                    .unwrap_or_default();
                return Err(SandboxError::InstanceInUse {
                    engine: "Docker engine",
                    instance: self.instance_id.clone(),
                    sandbox: name.trim_start_matches('/').to_owned(),
                    daemon: theirs,
                });
            }
        }
        Ok(())
    }

    /// Removes this daemon's sandboxes whose task is not in `running`.
    pub(super) async fn reap_orphans(&self, running: &[String]) -> Result<Vec<String>, SandboxError> {
        let mut removed = Vec::new();
        for container in self.list_instance(true).await? {
            let task = label(&container, labels::TASK);
            // A sandbox without the label is from before it existed: as
            // before, this instance's.
            let owner = label(&container, labels::DAEMON);
            let anothers = matches!(&self.daemon_id, Some(ours) if !owner.is_empty() && &owner != ours);
            let Some(id) = container.id else { continue };
            if running.contains(&task) || anothers {
                continue;
            }
            tracing::info!(container = %&id[..12.min(id.len())], task = %task, "reaping orphaned sandbox");
            remove_container(&self.docker, &id).await?;
            removed.push(id);
        }
        Ok(removed)
    }

    /// The containers of this instance (stopped ones too with `all`).
    async fn list_instance(&self, all: bool) -> Result<Vec<ContainerSummary>, SandboxError> {
        let filters = HashMap::from([(
            "label",
            vec![
                format!("{}=true", labels::MANAGED),
                format!("{}={}", labels::INSTANCE, self.instance_id),
            ],
        )]);
        let options = ListContainersOptionsBuilder::default()
            .all(all)
            .filters(&filters)
            .build();
        self.docker
            .list_containers(Some(options))
            .await
            .map_err(|e| docker_error("list forgehand's containers", e))
    }
}

fn label(container: &ContainerSummary, key: &str) -> String {
    container
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .cloned()
        .unwrap_or_default()
}
