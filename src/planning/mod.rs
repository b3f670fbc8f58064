//! Planning: packing code for a model ([`pack`], [`select`]),
//! the sage tools ([`sage`]: opinion and review; [`debate`]: the plan
//! debate), and their MCP server ([`server`]); the context store
//! ([`context`], [`classify`]) and idea options ([`ideas`], served by
//! [`ideas_server`]).

pub mod classify;
pub mod context;
pub mod debate;
pub mod ideas;
pub mod ideas_server;
pub mod pack;
pub mod prompts;
pub mod review;
pub mod sage;
pub mod select;
pub mod server;
