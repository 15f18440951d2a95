//! The TLS client configuration shared by every upstream transport that dials TLS itself
//! (`https://` streamable HTTP, `wss://`): rustls with the platform verifier, built once.
//! One configuration means one trust decision for every server.

use std::sync::{Arc, OnceLock};

/// The process's TLS client configuration; the error says why the platform's trust store
/// could not be loaded (the same error every time).
pub fn client_config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            use rustls_platform_verifier::ConfigVerifierExt;
            rustls::ClientConfig::with_platform_verifier().map(Arc::new).map_err(|e| e.to_string())
        })
        .clone()
}
