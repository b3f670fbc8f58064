//! The whole checkout, read and packed for the planners in the background
//! from the moment it is cloned: started when the task is prepared (or a
//! plan is made for approval), taken by the planning phase. A pack that
//! planning turns out not to need (no debate fits any window, the plan is
//! kept or was approved) is stopped when it is dropped, so it does not
//! hold the two cores the sandbox's copy and the agent's start share.

use crate::config::PlanningConfig;
use crate::planning::pack::{self, PackError, PackOptions};
use crate::planning::select;
use crate::task::workbench::workspace_handle::CheckedOut;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The whole checkout, being read and packed for the planners in the
/// background from the moment it is cloned (the sandbox starts meanwhile).
pub(in crate::task) struct PackedCode {
    /// The checkout, for what a failed read says.
    root: PathBuf,
    reading: tokio::task::JoinHandle<Result<select::Whole, PackError>>,
    /// Set when the pack is no longer wanted: the blocking read, which an
    /// abort cannot reach, stops before the count (most of its time).
    stopped: Arc<AtomicBool>,
}

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
        let root = checkout.clone();
        let stopped = Arc::new(AtomicBool::new(false));
        let stop_seen = stopped.clone();
        let reading = tokio::spawn(async move {
            if let Err(detail) = checked_out.await {
                return Err(PackError::Root {
                    root: checkout,
                    detail,
                });
            }
            let failed_root = checkout.clone();
            tokio::task::spawn_blocking(move || read_unless_stopped(&checkout, options, &stop_seen))
                .await
                .unwrap_or_else(|e| {
                    Err(PackError::Root {
                        root: failed_root,
                        detail: format!("the pack stopped: {e}"),
                    })
                })
        });
        Some(PackedCode {
            root,
            reading,
            stopped,
        })
    }

    /// The whole checkout, packed: waits for the read to finish.
    pub(in crate::task) async fn whole(mut self) -> Result<select::Whole, PackError> {
        match (&mut self.reading).await {
            Ok(whole) => whole,
            Err(e) => Err(PackError::Root {
                root: self.root.clone(),
                detail: format!("the pack stopped: {e}"),
            }),
        }
    }
}

impl Drop for PackedCode {
    fn drop(&mut self) {
        // Nothing once the read has finished; otherwise its result would
        // go unread, so the work stops.
        self.stopped.store(true, Ordering::Relaxed);
        self.reading.abort();
    }
}

/// Reads the checkout, then packs and counts it unless `stopped` was set
/// meanwhile (the count is most of a pack's time).
fn read_unless_stopped(
    checkout: &std::path::Path,
    options: PackOptions,
    stopped: &AtomicBool,
) -> Result<select::Whole, PackError> {
    let stopped_error = || PackError::Root {
        root: checkout.to_owned(),
        detail: "the pack was no longer wanted".to_owned(),
    };
    if stopped.load(Ordering::Relaxed) {
        return Err(stopped_error());
    }
    let corpus = pack::read(checkout, &[".".to_owned()], options)?;
    if stopped.load(Ordering::Relaxed) {
        return Err(stopped_error());
    }
    Ok(select::Whole::from_corpus(corpus))
}
