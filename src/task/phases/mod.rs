//! The phases of a task, each a step from what the last one handed on to
//! its own output: the claim, the preparation, the plan (and its approval),
//! the change (with its attempts and their judge), the tests, the push, the
//! delivery, and the checks followed after it.

pub mod approval;
pub mod attempts;
pub mod change;
pub mod ci;
pub mod ci_round;
pub mod claim;
pub mod context;
pub mod deliver;
pub mod gate;
pub mod judge;
pub mod packing;
pub mod plan;
pub mod prepare;
pub mod push;
pub mod ready_pr;
pub mod request;
pub mod review;
pub mod steer;
pub mod task_plan;
pub mod thread_images;
pub mod verify;
