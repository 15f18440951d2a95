//! The harness the integration tests share: real processes on loopback ports. The gateway
//! under test is the built `mcp-gateway` binary; its upstreams, callers, stores and validators
//! are the peers of `tests/peers/` (its README says which test uses which). A missing peer is
//! a test failure naming what to install, never a silent skip. One file per concern:
//! `process` (child processes, ports, waiting), `files` (temp files unique within the one test
//! process), `gateway` (the gateway under test and its subcommands), `demo` (the binary's demo
//! MCP server), `peers` (tests/peers/ and the npm servers), `gated` (the gated SDK server of
//! the reload tests and its record), `stores` (Redis, DynamoDB Local and the registry table),
//! `tls` (a private CA), `answers` (reading answers, streams and metrics).

mod answers;
mod demo;
mod files;
mod gated;
mod gateway;
mod peers;
mod process;
mod stores;
mod tls;

pub use answers::*;
pub use demo::*;
pub use files::*;
pub use gated::*;
pub use gateway::*;
pub use peers::*;
pub use process::*;
pub use stores::*;
pub use tls::*;
