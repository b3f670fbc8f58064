//! What a task is and keeps between its runs: its state's records (the
//! phases' records, the agent's checkpoints, where they are kept), what it
//! waits for next (`action`), how it ends, and its errors.

pub mod action;
pub mod checkpoint;
pub mod end;
pub mod error;
pub mod phase_records;
pub mod records;
pub mod resume;
