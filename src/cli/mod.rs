//! The `mcp-gateway` binary's commands, one file each: [`args`] is the command line as clap
//! reads it, [`signal`] the stop signals `serve` and `demo-server` wait for, and every other
//! file runs one subcommand. These are modules of the binary (`src/main.rs` declares them),
//! not of the library: what they do — parse flags, print to stdout, pick exit codes, build the
//! runtime, wait for signals — belongs to a process, and the library they call stays usable
//! without it.

mod args;
mod check_config;
mod demo_server;
mod export;
mod healthcheck;
mod registry;
mod reload;
mod serve;
mod signal;

use std::time::Duration;

use clap::Parser;
use mcp_gateway::{config::Config, demo};

use args::{Cli, Command, ToolsAction};

/// Parses the command line and runs the command.
pub fn run() -> anyhow::Result<()> {
    without_transparent_huge_pages();
    let cli = Cli::parse();
    if let Command::Healthcheck { url, config } = &cli.command {
        std::process::exit(healthcheck::run(url.clone(), config.as_deref()));
    }
    // The runtime's shape is configuration (`worker_threads`), so `serve` reads it first.
    let workers = match &cli.command {
        // Read only: `serve` validates it once `--demo`'s server has joined.
        Command::Serve { config, .. } => Config::read(config.as_deref(), std::env::vars())?.worker_threads,
        _ => 1,
    };
    let runtime = match workers {
        1 => tokio::runtime::Builder::new_current_thread().enable_all().build()?,
        0 => tokio::runtime::Builder::new_multi_thread().enable_all().build()?,
        n => tokio::runtime::Builder::new_multi_thread().worker_threads(n).enable_all().build()?,
    };
    runtime.block_on(async move {
        match cli.command {
            Command::Serve { config, listen, allow_non_loopback, demo, watch, log_format } => {
                let flags = serve::Flags { listen, allow_non_loopback, demo, watch, log_format };
                serve::run(config, flags).await
            }
            Command::DemoServer { listen, lambda_api, delay_ms, sessions, extra_tools } => {
                demo::tools::set_extra_tools(extra_tools);
                let options = demo::http::DemoOptions { delay: Duration::from_millis(delay_ms), sessions };
                demo_server::run(listen, lambda_api, options).await
            }
            Command::Registry { config, table, action } => registry::run(config, table, action).await,
            Command::Tools {
                action: ToolsAction::Export { format, strict, hide_unavailable, url, token_file, config, endpoint },
            } => {
                let source = export::Source { url, token_file, config, endpoint };
                export::run(&format, strict, hide_unavailable, source).await
            }
            Command::Healthcheck { .. } => unreachable!("handled before the runtime starts"),
            Command::CheckConfig { config, json, demo } => check_config::run(config, json, demo).await,
        }
    })
}

/// Turns transparent huge pages off for this process. An allocator that asks for huge pages on
/// its arenas (`madvise`) faults in whole 2 MiB pages on the first allocations: an idle gateway
/// measured 10 MiB of them (of 11.5 MiB anonymous memory). A sidecar's heap is small and its
/// memory is budgeted, so resident size matters more here than the TLB savings huge pages bring
/// to large heaps. mimalloc is built with `no_thp` (it does not ask); this prctl also covers
/// hosts whose THP mode is `always`. It fails harmlessly on kernels without it.
fn without_transparent_huge_pages() {
    // SAFETY: PR_SET_THP_DISABLE takes plain integer arguments and touches no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}
