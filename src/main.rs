//! The `mcp-gateway` binary: the allocator it runs with, and its commands ([`cli`]), a thin
//! layer over the library.

mod cli;

/// mimalloc: the gateway allocates many small, short-lived buffers per call; a thread-caching
/// allocator makes that measurably cheaper than glibc malloc (see bench/results.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    cli::run()
}
