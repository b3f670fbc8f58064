//! forgehand's integration tests, as one binary: the crate is linked once
//! for all of them instead of once per file. Each area is a module of
//! `suite/`; what the areas share (fakes, rigs, Docker helpers) is the
//! `forgehand-test-support` crate.

mod suite;
