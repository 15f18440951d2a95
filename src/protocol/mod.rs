//! The wire: JSON-RPC 2.0 envelopes, the two MCP protocol eras, and SSE framing.

pub mod extensions;
pub mod jsonrpc;
pub mod mcp;
pub mod mrtr;
pub mod param_headers;
pub mod sse;
pub mod tasks;
