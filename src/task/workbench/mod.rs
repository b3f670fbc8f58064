//! Where a task's change is made: the sandbox (started, or restored from a
//! setup snapshot), the host's work tree handed between the phases, and
//! what crosses between the two (commits fetched out, work committed).

pub mod sandbox_commit;
pub mod sandbox_fetch;
pub mod session;
pub mod snapshot;
pub mod start_sandbox;
pub mod workspace_handle;
