//! Named points of a task's run where a test may have the daemon die on
//! the spot, as a SIGKILL would (`FORGEHAND_TEST_KILL_AT=<point>`): the
//! kill-point tests prove that a run survives each transition with nothing
//! lost or doubled. Unset (always, outside those tests), a point costs one
//! read of the environment.

/// The model's tools ran; the step's checkpoint is not taken yet.
pub const TOOLS_RAN: &str = "tools-ran";
/// A checkpoint's files are out of the sandbox; its record is not written.
pub const CHECKPOINT_TAKEN_OUT: &str = "checkpoint-taken-out";
/// The branch is pushed; the push's record is not written.
pub const PUSHED: &str = "pushed";
/// The PR/MR is open on the forge; the journal does not know it yet.
pub const CHANGE_OPENED: &str = "change-opened";

/// Dies here when the test asks for this point.
pub fn reached(point: &str) {
    if std::env::var("FORGEHAND_TEST_KILL_AT").is_ok_and(|at| at == point) {
        eprintln!("forgehand: dying at the kill point {point:?}, as FORGEHAND_TEST_KILL_AT asks");
        std::process::abort();
    }
}
