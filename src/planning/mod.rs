//! Planning (seed 000): packing code for a model ([`pack`], [`select`]),
//! the sage tools ([`sage`]: opinion and review; [`debate`]: the plan
//! debate), and their MCP server ([`server`]).

pub mod debate;
pub mod pack;
pub mod prompts;
pub mod review;
pub mod sage;
pub mod select;
pub mod server;
