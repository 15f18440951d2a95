//! The console's playground shows a tool's MCP App: `POST /admin/playground/app` reads the
//! app's `ui://` resource as the playground's caller (through the one way out: policy,
//! after-hooks, budget) and keeps its page for one load at `GET /admin/console/app/<id>`, which
//! the console frames `sandbox="allow-scripts"` (no same origin).
//!
//! Why a page of its own rather than `srcdoc` or a `blob:` frame: those inherit the console's
//! Content-Security-Policy (no inline script), so an app's scripts would not run; and the
//! console must not relax its own policy for a server's page. The page is served with the
//! policy an MCP Apps host builds from the resource's `_meta.ui.csp` (its domains only, inline
//! script and style allowed, nothing else), under `sandbox allow-scripts`, so even opened
//! outside the frame it runs in an opaque origin: it can read neither the console nor the
//! token in its `sessionStorage`.
//!
//! Why the page answers without the admin token: a frame cannot send one. Its id is the
//! capability instead — 128 random bits minted for a request that had the token, good for one
//! load within [`FRAME_TTL`]; at most [`MAX_FRAMES`] wait (the oldest leaves first). A domain in
//! `_meta.ui.csp` that is not a plain CSP source (a `;`, a quote, a space…) refuses the frame
//! rather than let a server write the policy.

use std::{
    collections::VecDeque,
    sync::{Arc, LazyLock, Mutex},
    time::{Duration, Instant},
};

use axum::{
    Json,
    body::Bytes,
    extract::{Path, State},
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

use crate::{gateway::Gateway, identity::Caller, protocol::extensions};

/// Where a kept page is served (`<PREFIX><id>`).
pub const PREFIX: &str = "/admin/console/app/";
/// How long a kept page waits for its one load.
pub const FRAME_TTL: Duration = Duration::from_secs(60);
/// Most pages kept at once.
pub const MAX_FRAMES: usize = 16;

struct Kept {
    id: String,
    at: Instant,
    html: String,
    policy: String,
}

static FRAMES: LazyLock<Mutex<VecDeque<Kept>>> = LazyLock::new(Mutex::default);

/// Whether `path` is a kept page's (served without the admin token: the id is the capability).
pub fn is_frame(path: &str) -> bool {
    path.strip_prefix(PREFIX)
        .is_some_and(|id| id.starts_with(crate::backchannel::ID_PREFIX) && id.len() <= 64)
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct AppRequest {
    uri: String,
}

/// `POST /admin/playground/app` `{"uri": "ui://…"}` → `{"frame": PATH, "policy": CSP}`, or
/// `{"error": …}` saying why the app is not shown.
pub async fn open(State(gateway): State<Arc<Gateway>>, body: Bytes) -> Response {
    let request: AppRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({"error": format!("body must be {{\"uri\": URI}}: {e}")})),
            )
                .into_response();
        }
    };
    let caller = Caller { subject: Some(super::playground::PLAYGROUND_SUBJECT.into()), ..Caller::default() };
    let call = crate::gateway::federation::SurfaceCall {
        caller: Arc::new(caller),
        request_id: format!("console-app-{:016x}", fastrand::u64(..)).into(),
        deadline: None,
        modern: false,
    };
    let read = gateway.surface_method("resources/read", Some(json!({"uri": request.uri})), &call).await;
    let result = match read {
        Ok(released) => released.into_inner(),
        Err(err) => return Json(json!({"error": err.to_error_object_for(false)})).into_response(),
    };
    let Some(content) = result.get("contents").and_then(|c| c.get(0)) else {
        return Json(json!({"error": "the resource has no content"})).into_response();
    };
    if content.get("mimeType").and_then(Value::as_str) != Some(extensions::APP_MIME_TYPE) {
        return Json(
            json!({"error": format!("not an MCP App's page (MIME type {})", extensions::APP_MIME_TYPE)}),
        )
        .into_response();
    }
    let Some(html) = content.get("text").and_then(Value::as_str) else {
        return Json(json!({"error": "the app's page is not text"})).into_response();
    };
    let policy = match policy(content.pointer("/_meta/ui/csp")) {
        Ok(policy) => policy,
        Err(bad) => {
            return Json(
                json!({"error": format!("the app's _meta.ui.csp names {bad:?}, not a plain CSP source")}),
            )
            .into_response();
        }
    };
    let id = crate::backchannel::caller::mint_id("app");
    if let Ok(mut frames) = FRAMES.lock() {
        frames.retain(|k| k.at.elapsed() < FRAME_TTL);
        while frames.len() >= MAX_FRAMES {
            frames.pop_front();
        }
        frames.push_back(Kept {
            id: id.clone(),
            at: Instant::now(),
            html: html.to_string(),
            policy: policy.clone(),
        });
    }
    Json(json!({"frame": format!("{PREFIX}{id}"), "policy": policy})).into_response()
}

/// `GET /admin/console/app/<id>`: the kept page, once, under its policy; 404 otherwise.
pub async fn serve(Path(id): Path<String>) -> Response {
    let kept = FRAMES.lock().ok().and_then(|mut frames| {
        let at = frames.iter().position(|k| k.id == id)?;
        frames.remove(at).filter(|k| k.at.elapsed() < FRAME_TTL)
    });
    let Some(kept) = kept else {
        return (StatusCode::NOT_FOUND, "no such app page (each is served once, within a minute)")
            .into_response();
    };
    let mut response = kept.html.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    if let Ok(policy) = HeaderValue::from_str(&kept.policy) {
        headers.insert(header::CONTENT_SECURITY_POLICY, policy);
    }
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The policy an MCP Apps host gives a page from its `_meta.ui.csp`: its domains only, inline
/// script and style, `sandbox allow-scripts`; `Err` names a domain that is not a plain source.
fn policy(csp: Option<&Value>) -> Result<String, String> {
    let sources = |key: &str| -> Result<Vec<String>, String> {
        let Some(list) = csp.and_then(|c| c.get(key)).and_then(Value::as_array) else {
            return Ok(Vec::new());
        };
        list.iter()
            .take(32)
            .map(|v| {
                let s = v.as_str().unwrap_or_default();
                let plain = !s.is_empty()
                    && s.len() <= 256
                    && s.bytes().all(|b| b.is_ascii_alphanumeric() || b".-_:/*".contains(&b));
                if plain { Ok(s.to_string()) } else { Err(s.chars().take(80).collect()) }
            })
            .collect()
    };
    let resource = sources("resourceDomains")?.join(" ");
    let connect = sources("connectDomains")?;
    let frame = sources("frameDomains")?;
    let base = sources("baseUriDomains")?;
    let or_none = |list: Vec<String>| if list.is_empty() { "'none'".to_string() } else { list.join(" ") };
    let with =
        |fixed: &str| if resource.is_empty() { fixed.to_string() } else { format!("{fixed} {resource}") };
    Ok(format!(
        "sandbox allow-scripts; default-src 'none'; script-src {}; style-src {}; img-src {}; font-src {}; media-src {}; connect-src {}; frame-src {}; base-uri {}; form-action 'none'",
        with("'unsafe-inline'"),
        with("'unsafe-inline'"),
        with("data:"),
        with("data:"),
        with("data:"),
        or_none(connect),
        or_none(frame),
        or_none(base),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_is_the_resources_domains_and_nothing_a_server_can_inject() {
        let csp = json!({"connectDomains": ["https://api.example.com"], "resourceDomains": ["https://cdn.example.com"]});
        let p = policy(Some(&csp)).unwrap();
        assert!(p.starts_with("sandbox allow-scripts; default-src 'none'; script-src 'unsafe-inline' https://cdn.example.com;"), "{p}");
        assert!(p.contains("connect-src https://api.example.com;") && p.contains("frame-src 'none'"), "{p}");
        let none = policy(None).unwrap();
        assert!(
            none.contains("connect-src 'none'") && none.contains("script-src 'unsafe-inline';"),
            "{none}"
        );
        for bad in ["https://x.com; script-src *", "'unsafe-eval'", "a b", ""] {
            assert!(policy(Some(&json!({"connectDomains": [bad]}))).is_err(), "{bad}");
        }
        assert!(is_frame("/admin/console/app/mcpgw-app-00") && !is_frame("/admin/console/app/x"));
    }
}
