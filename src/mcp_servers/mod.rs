//! The MCP servers forgehand offers to other agents (`forgehand mcp
//! sage|ideas|text-editor`), over stdio or Streamable HTTP ([`transport`]):
//! the sage tools ([`sage`]) and idea options with the context store
//! ([`ideas`]). The text
//! editor's server is the `forgehand-editor` crate's. The sessions forgehand
//! opens as a client, in its sandboxes, are `crate::mcp`.

pub mod ideas;
pub mod sage;
pub mod transport;
