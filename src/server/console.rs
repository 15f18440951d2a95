//! The operators' console: `GET /admin/console` (the page), `/admin/console/console.js` and
//! `/admin/console/console.css`, compiled into the binary (no CDN, no build step, no file to
//! ship beside it).
//!
//! Why these three answer without the admin token: they hold no data (the page asks the
//! operator for the token and sends it as `Authorization: Bearer` on every data request and
//! action; it keeps it in `sessionStorage`, and the gateway sets no cookie, so a foreign page
//! has no ambient credential to ride). They are still admin routes: refused where and when the
//! admin routes are (admin off, the main listener while `admin.listen` is set, a non-loopback
//! peer of a token-less admin listener); the exemption is decided in [`super::admin`]'s guard
//! ([`is_console_asset`]). Every answer carries a strict Content-Security-Policy (no inline
//! script or style, nothing from elsewhere, no framing) and is never cached. See
//! `docs/console.md`.

use std::sync::Arc;

use axum::{
    Router,
    http::{HeaderValue, header},
    response::{IntoResponse, Response},
    routing::get,
};

use crate::gateway::Gateway;

/// The page.
pub const PAGE: &str = "/admin/console";
/// Its script.
pub const SCRIPT: &str = "/admin/console/console.js";
/// Its style sheet.
pub const STYLE: &str = "/admin/console/console.css";

/// The policy of every console response: the page's own script, style and data requests, and
/// frames of its own origin (a tool's MCP App page, `app_frame`, which runs sandboxed under its
/// own policy), nothing else.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; frame-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const INDEX_HTML: &str = include_str!("console/assets/index.html");
const CONSOLE_JS: &str = include_str!("console/assets/console.js");
const CONSOLE_CSS: &str = include_str!("console/assets/console.css");

/// Whether `path` is one of the three console assets (exactly: no prefix, no trailing slash).
pub fn is_console_asset(path: &str) -> bool {
    matches!(path, PAGE | SCRIPT | STYLE)
}

/// The three routes (the admin guard is put in front of them by [`super::admin::routes`]).
pub fn routes() -> Router<Arc<Gateway>> {
    Router::new()
        .route(PAGE, get(|| async { asset(INDEX_HTML, "text/html; charset=utf-8") }))
        .route(SCRIPT, get(|| async { asset(CONSOLE_JS, "text/javascript; charset=utf-8") }))
        .route(STYLE, get(|| async { asset(CONSOLE_CSS, "text/css; charset=utf-8") }))
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_three_assets_are_console_paths() {
        assert!(is_console_asset("/admin/console"));
        assert!(is_console_asset("/admin/console/console.js"));
        assert!(is_console_asset("/admin/console/console.css"));
        for other in [
            "/admin/console/",
            "/admin/console/x.js",
            "/admin/overview",
            "/admin/consolex",
            "/admin/console/../breakers",
        ] {
            assert!(!is_console_asset(other), "{other}");
        }
    }

    #[test]
    fn the_page_loads_nothing_from_elsewhere_and_nothing_inline() {
        // The policy forbids inline script and style; the page must not rely on them.
        assert!(!INDEX_HTML.contains("<style"));
        assert!(!INDEX_HTML.contains(" style="));
        for script in INDEX_HTML.split("<script").skip(1) {
            assert!(
                script.trim_start().starts_with("src=") || script.contains(" src="),
                "inline script: {script}"
            );
        }
    }
}
