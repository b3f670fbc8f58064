//! The whole checkout, read and packed for the planners in the background
//! from the moment it is cloned: started when the task is prepared (or a
//! plan is made for approval), taken by the planning phase.

use crate::config::PlanningConfig;
use crate::planning::pack::PackOptions;
use crate::planning::select;
use crate::task::workbench::workspace_handle::CheckedOut;
use std::path::PathBuf;

/// The whole checkout, being read and packed for the planners in the
/// background from the moment it is cloned (the sandbox starts meanwhile).
pub(in crate::task) struct PackedCode(
    pub(in crate::task) tokio::task::JoinHandle<Result<select::Whole, crate::planning::pack::PackError>>,
);

impl PackedCode {
    /// Starts packing `checkout` once its files are written, unless
    /// planning is off.
    pub(in crate::task) fn start(
        config: &PlanningConfig,
        (checkout, checked_out): (PathBuf, CheckedOut),
    ) -> Option<PackedCode> {
        if config.mode == crate::config::PlanningMode::Off {
            return None;
        }
        let options = PackOptions {
            max_file_bytes: config.max_file_bytes,
        };
        Some(PackedCode(tokio::spawn(async move {
            if let Err(detail) = checked_out.await {
                return Err(crate::planning::pack::PackError::Root {
                    root: checkout,
                    detail,
                });
            }
            let root = checkout.clone();
            tokio::task::spawn_blocking(move || select::read_whole(&checkout, options))
                .await
                .unwrap_or_else(|e| {
                    Err(crate::planning::pack::PackError::Root {
                        root,
                        detail: format!("the pack stopped: {e}"),
                    })
                })
        })))
    }
}
