//! The `mcp-gateway` binary: the allocator it runs with, and its commands ([`cli`]), a thin
//! layer over the library.

mod cli;

/// mimalloc, called as [`mcp_gateway::allocator`] explains.
#[global_allocator]
static GLOBAL: mcp_gateway::allocator::MiMalloc = mcp_gateway::allocator::MiMalloc;

fn main() -> anyhow::Result<()> {
    cli::run()
}
