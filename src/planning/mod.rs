//! Planning: packing code for a model ([`pack`], [`select`], the counts
//! kept between packs in [`counts`]) and the sage
//! tools ([`sage`]: opinion and review; [`debate`]: the plan debate). The
//! MCP server that offers them is `crate::mcp_servers::sage`.

pub mod committed;
pub mod counts;
pub mod debate;
pub mod pack;
pub mod prompts;
pub mod review;
pub mod sage;
pub mod select;
