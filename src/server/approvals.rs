//! Deciding approvals of tool calls (`crate::approvals`): the operators' admin routes, and the
//! page of the caller's user.
//!
//! Operators: `GET /admin/approvals` (waiting approvals with the arguments as the server will
//! see them, who asks, and the history), `POST /admin/approvals/{id}/approve|deny` — behind
//! the admin guard like every admin route (the console's Approvals page uses them).
//!
//! The caller's user: `GET /approvals/{id}` serves a page that holds no data; the link's
//! fragment (`#<secret>`, 256 random bits, single use, bound to that one approval) never
//! leaves the browser except in the JSON bodies of `POST /approvals/{id}/view` (the facts; no
//! side effect) and `POST /approvals/{id}/decision` (`{"secret", "decision": "approve" |
//! "deny"}`). Why this shape: a `GET` changes nothing (a prefetch or a link scanner decides
//! nothing), the secret is in no URL a server, a proxy log or a `Referer` sees, and a foreign
//! page can neither read the facts nor post a decision (JSON bodies need a CORS preflight the
//! gateway never grants, the main listener refuses foreign `Origin`s, and it lacks the
//! secret). The page's answers carry a strict Content-Security-Policy, `frame-ancestors
//! 'none'` (no clickjacking of the Approve button), `no-store` and `no-referrer`.

use std::sync::Arc;

use axum::{
    Json, Router,
    extract::{Path, State},
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{approvals::Refused, gateway::Gateway};

const PAGE_HTML: &str = include_str!("approvals/page.html");
const PAGE_JS: &str = include_str!("approvals/page.js");
const PAGE_CSS: &str = include_str!("approvals/page.css");

/// The page's policy: its own script, style and data requests; no framing, no form posts.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The admin routes (the admin guard is put in front of them by `super::admin::routes`).
pub fn admin_routes() -> Router<Arc<Gateway>> {
    Router::new()
        .route("/admin/approvals", get(listing))
        .route("/admin/approvals/{id}/{action}", post(operator_decision))
}

/// The page's routes, on the main listener.
pub fn page_routes() -> Router<Arc<Gateway>> {
    Router::new()
        .route("/approvals/{id}", get(|| async { asset(PAGE_HTML, "text/html; charset=utf-8") }))
        .route("/approvals/{id}/view", post(view))
        .route("/approvals/{id}/decision", post(user_decision))
        .route(
            "/approvals-assets/page.js",
            get(|| async { asset(PAGE_JS, "text/javascript; charset=utf-8") }),
        )
        .route("/approvals-assets/page.css", get(|| async { asset(PAGE_CSS, "text/css; charset=utf-8") }))
}

async fn listing(State(gateway): State<Arc<Gateway>>) -> Response {
    Json(gateway.approvals_listing()).into_response()
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct OperatorBody {
    /// Who the operator says they are (recorded as `operator:<name>`; the admin token is the
    /// authentication, this is a label).
    operator: Option<String>,
}

async fn operator_decision(
    State(gateway): State<Arc<Gateway>>,
    Path((id, action)): Path<(String, String)>,
    body: Option<Json<OperatorBody>>,
) -> Response {
    let approve = match action.as_str() {
        "approve" => true,
        "deny" => false,
        _ => return refusal(StatusCode::BAD_REQUEST, "action must be approve or deny"),
    };
    let by = match body.and_then(|Json(b)| b.operator).map(|name| label(&name)) {
        Some(name) if !name.is_empty() => format!("operator:{name}"),
        _ => "operator".to_string(),
    };
    decided(gateway.decide_approval(&id, approve, &by, None))
}

#[derive(Deserialize)]
struct SecretBody {
    secret: String,
    #[serde(default)]
    decision: Option<String>,
}

async fn view(
    State(gateway): State<Arc<Gateway>>,
    Path(id): Path<String>,
    Json(body): Json<SecretBody>,
) -> Response {
    match gateway.approval_for_page(&id, &body.secret) {
        Some(facts) => page_json(StatusCode::OK, facts),
        None => page_json(
            StatusCode::NOT_FOUND,
            json!({"error": "no approval waits at this link (decided, expired, or not this link)"}),
        ),
    }
}

async fn user_decision(
    State(gateway): State<Arc<Gateway>>,
    Path(id): Path<String>,
    Json(body): Json<SecretBody>,
) -> Response {
    let approve = match body.decision.as_deref() {
        Some("approve") => true,
        Some("deny") => false,
        _ => return page_json(StatusCode::BAD_REQUEST, json!({"error": "decision must be approve or deny"})),
    };
    let mut answer = decided(gateway.decide_approval(&id, approve, "user", Some(&body.secret)));
    set_page_headers(answer.headers_mut());
    answer
}

fn decided(result: Result<Value, Refused>) -> Response {
    match result {
        Ok(facts) => Json(facts).into_response(),
        Err(Refused::NotFound) => refusal(
            StatusCode::NOT_FOUND,
            "no approval of this id waits for a decision (decided, used or expired)",
        ),
        Err(Refused::WrongSecret) => refusal(StatusCode::NOT_FOUND, "no approval waits at this link"),
    }
}

fn refusal(status: StatusCode, error: &str) -> Response {
    (status, Json(json!({"error": error}))).into_response()
}

/// Printable characters of a self-declared name, at most 64.
fn label(name: &str) -> String {
    name.chars().filter(|c| !c.is_control()).take(64).collect::<String>().trim().to_string()
}

fn page_json(status: StatusCode, body: Value) -> Response {
    let mut response = (status, Json(body)).into_response();
    set_page_headers(response.headers_mut());
    response
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut response = body.into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    set_page_headers(response.headers_mut());
    response
}

fn set_page_headers(headers: &mut axum::http::HeaderMap) {
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_page_holds_no_inline_script_or_style_and_reads_its_secret_from_the_fragment() {
        let html = super::PAGE_HTML;
        assert!(!html.contains("<style") && !html.contains(" style="));
        for script in html.split("<script").skip(1) {
            assert!(script.contains(" src="), "inline script: {script}");
        }
        assert!(super::PAGE_JS.contains("location.hash"));
        assert!(!super::PAGE_JS.contains("innerHTML"), "facts are set as text, never parsed as HTML");
    }
}
