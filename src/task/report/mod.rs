//! What a task tells: the sink its events go to and the subscribers that
//! follow it (the progress comment, the board, the metrics, the transcript),
//! and the sections the comment and the PR/MR carry.

pub mod board;
pub mod ci_log;
pub mod ending;
pub mod events;
pub mod left_out;
pub mod lfs_note;
pub mod progress;
pub mod submodule_report;
pub mod subscribers;
