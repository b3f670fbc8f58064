//! Several daemon replicas working one set of forges: which replica works
//! which task is decided by Kubernetes Leases, one per task.

pub mod lease;
