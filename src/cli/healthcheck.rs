//! `healthcheck`: a container health check without a shell or curl. It runs before (and
//! instead of) the command runtime, on a small one of its own, and answers with an exit code.

use mcp_gateway::{config::Config, server};

/// Runs the health probe; returns the process exit code.
pub fn run(url: Option<String>, config: Option<&std::path::Path>) -> i32 {
    use std::io::Write;
    let url = match url {
        Some(url) => url,
        None => match Config::load(config, std::env::vars()) {
            Ok(config) => server::probe::default_url(config.listen),
            Err(e) => {
                let _ = writeln!(std::io::stderr(), "unhealthy: cannot read the configuration: {e:#}");
                return 1;
            }
        },
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "unhealthy: cannot start a runtime: {e}");
            return 1;
        }
    };
    match runtime.block_on(server::probe::probe(&url)) {
        Ok(line) => {
            let _ = writeln!(std::io::stdout(), "{line}");
            0
        }
        Err(line) => {
            let _ = writeln!(std::io::stderr(), "{line}");
            1
        }
    }
}
