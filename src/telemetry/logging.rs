//! Logging: JSON lines on stdout through a non-blocking, *lossy* writer, so a slow or stuck
//! log pipe never stalls a request: lines go through a bounded buffer (128 000 lines and
//! `inbound.log_queue_bytes` bytes) to a writer thread, and when the buffer is full new lines
//! are dropped rather than the request thread waiting. Dropped lines are counted (`mcp_gateway_log_lines_dropped_total`, and their bytes
//! `mcp_gateway_log_bytes_dropped_total`); JSON field values are cut at
//! `inbound.log_max_field_bytes`, since callers choose request ids, JSON-RPC ids and names. Call
//! lines carry an argument *hash*, never the arguments.

use std::sync::OnceLock;

use tracing_subscriber::{EnvFilter, fmt, prelude::*};

use super::{
    json_lines::JsonLines,
    lossy::{self, DroppedLines, Guard},
};

/// The installed writer's count of dropped lines.
static DROPPED: OnceLock<DroppedLines> = OnceLock::new();

/// Lines the writer may hold while stdout does not keep up (see [`super::lossy`]).
pub const BUFFERED_LINES: usize = 128_000;

/// Log lines dropped so far because the writer could not keep up (0 before [`init`]).
pub fn dropped_lines() -> u64 {
    DROPPED.get().map_or(0, DroppedLines::get)
}

/// Bytes of the log lines dropped so far (0 before [`init`]).
pub fn dropped_bytes() -> u64 {
    DROPPED.get().map_or(0, DroppedLines::bytes)
}

/// What a log line and the queue of lines may hold (`inbound.log_max_field_bytes`,
/// `inbound.log_queue_bytes`).
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub max_field_bytes: usize,
    pub queue_bytes: usize,
}

impl Bounds {
    pub fn from_config(limits: &crate::config::InboundLimits) -> Self {
        Self { max_field_bytes: limits.log_max_field_bytes, queue_bytes: limits.log_queue_bytes }
    }
}

impl Default for Bounds {
    fn default() -> Self {
        Self::from_config(&crate::config::InboundLimits::default())
    }
}

/// Installs the global subscriber. Keep the guard alive until exit: it flushes the writer.
pub fn init(filter: &str, json: bool) -> Guard {
    init_bounded(filter, json, Bounds::default())
}

/// [`init`] with the configured bounds of a line's fields and of the queue of lines.
pub fn init_bounded(filter: &str, json: bool, bounds: Bounds) -> Guard {
    let (writer, dropped, guard) =
        lossy::writer_bounded(std::io::stdout(), "log-writer", BUFFERED_LINES, bounds.queue_bytes);
    let _ = DROPPED.set(dropped);
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let registry = tracing_subscriber::registry().with(filter);
    if json {
        registry.with(JsonLines::new(writer).with_max_field_bytes(bounds.max_field_bytes)).init();
    } else {
        // Colour codes only for a person at a terminal: in a file or a pipe they are noise.
        let colour = std::io::IsTerminal::is_terminal(&std::io::stdout());
        registry.with(fmt::layer().with_ansi(colour).with_writer(writer)).init();
    }
    guard
}

/// Hash of canonical arguments, for correlating calls in logs without logging their content.
pub fn argument_hash(arguments: &serde_json::Value) -> String {
    crate::registry::record::canonical_hash(arguments)
}
