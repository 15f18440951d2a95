//! The store's demo MCP server: the six tools of `config/manga-tools.json` over a
//! deterministic fake catalogue (Japanese and English), so the gateway works out of the box.
//!
//! It runs in three ways: inside `mcp-gateway serve --demo`, on its own over streamable HTTP
//! (`mcp-gateway demo-server`), and as a Lambda-style handler behind a local implementation of
//! the Lambda Invoke REST API (`mcp-gateway demo-server --lambda-api`), which the tests also
//! use to produce function errors, throttling and proxy-shaped answers.

pub mod catalogue;
pub mod handler;
pub mod http;
pub mod lambda_api;
pub mod tools;
