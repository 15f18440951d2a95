//! [`GatewayError`]: a category with the context of the call (tool, server, attempts, retry
//! hint, structured extras), and the [`ErrorObject`] it becomes on the wire.

use std::{sync::Arc, time::Duration};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::Category;

/// A JSON-RPC error object: what every error becomes on the wire (upstreams' errors arrive in
/// the same shape). It lives here, with the table, so that the protocol codec can depend on
/// the error table without the table depending back on the codec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// The `_meta` key of a tool execution error the gateway made: its JSON-RPC error object.
pub const TOOL_ERROR_META: &str = "mcp-gateway/error";

/// A failure the gateway answers with a JSON-RPC error.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}: {detail}", category.as_str())]
pub struct GatewayError {
    pub category: Category,
    /// Human-readable detail appended to the message (never raw arguments or secrets).
    pub detail: String,
    pub tool: Option<Arc<str>>,
    pub server: Option<Arc<str>>,
    pub attempts: u32,
    pub retry_after: Option<Duration>,
    /// Extra structured data: schema violations, the upstream's own `error.data`, supported versions.
    pub extra: Option<Box<(&'static str, Value)>>,
    /// The upstream's own JSON-RPC code, for [`Category::UpstreamRejected`].
    pub upstream_code: Option<i64>,
}

impl GatewayError {
    pub fn new(category: Category, detail: impl Into<String>) -> Self {
        Self {
            category,
            detail: detail.into(),
            tool: None,
            server: None,
            attempts: 0,
            retry_after: None,
            extra: None,
            upstream_code: None,
        }
    }

    pub fn with_tool(mut self, tool: impl Into<Arc<str>>) -> Self {
        self.tool = Some(tool.into());
        self
    }

    pub fn with_server(mut self, server: impl Into<Arc<str>>) -> Self {
        self.server = Some(server.into());
        self
    }

    pub fn with_attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts;
        self
    }

    pub fn with_retry_after(mut self, retry_after: Option<Duration>) -> Self {
        self.retry_after = retry_after;
        self
    }

    pub fn with_extra(mut self, key: &'static str, value: Value) -> Self {
        self.extra = Some(Box::new((key, value)));
        self
    }

    /// Names the configured bound that was hit: `error.data.limit = {"key": …, "value": …}`.
    pub fn with_limit(self, key: &'static str, value: u64) -> Self {
        self.with_extra("limit", json!({"key": key, "value": value}))
    }

    /// This refusal as a tool execution error (SEP-1303), when it is one the model can act on:
    /// arguments that fail the schema or the catalogue's fixed arguments (`bad_input` with
    /// violations), a guardrail's refusal, the tool policy's denial. `None` for the rest, which
    /// stay protocol errors (an unknown tool, a malformed request, an upstream failure…).
    ///
    /// The text names the refusal and every violation (`/title: "" is shorter than 1
    /// character`), which is what agent frameworks show a model; the gateway's JSON-RPC error
    /// (code, message, `data` with category, retryable, attempts…) stays machine-readable in
    /// `_meta["mcp-gateway/error"]` (not `structuredContent`, which a tool's `outputSchema`
    /// constrains).
    pub fn to_tool_execution_error(&self, modern: bool) -> Option<Box<serde_json::value::RawValue>> {
        let violations = match (&self.category, self.extra.as_deref()) {
            (Category::BadInput, Some(("violations", Value::Array(violations)))) => Some(violations),
            (
                Category::Guardrail
                | Category::Forbidden
                | Category::ApprovalRequired
                | Category::ApprovalDenied,
                _,
            ) => None,
            _ => return None,
        };
        let error = self.to_error_object_for(modern);
        let mut text = error.message.clone();
        for violation in violations.into_iter().flatten() {
            let path = violation.get("path").and_then(Value::as_str).unwrap_or("");
            let message = violation.get("message").and_then(Value::as_str).unwrap_or("");
            text.push_str(&format!(
                "\n- {}: {message}",
                if path.is_empty() { "(the arguments)" } else { path }
            ));
        }
        let result = json!({
            "content": [{"type": "text", "text": text}],
            "isError": true,
            "_meta": {TOOL_ERROR_META: error},
        });
        serde_json::value::to_raw_value(&result).ok()
    }

    /// The JSON-RPC error object, with `error.data` as documented in the README.
    pub fn to_error_object(&self) -> ErrorObject {
        self.to_error_object_for(false)
    }

    /// [`Self::to_error_object`] for a caller of the modern revision when `modern` (see
    /// [`Category::modern_code`]); an upstream's own code is passed through either way.
    pub fn to_error_object_for(&self, modern: bool) -> ErrorObject {
        let code = match (self.category, self.upstream_code) {
            (Category::UpstreamRejected, Some(code)) => code,
            (category, _) if modern => category.modern_code(),
            (category, _) => category.code(),
        };
        let stem = self.category.message();
        let message = if self.detail.is_empty() {
            stem.to_string()
        } else if self.detail.get(..stem.len()).is_some_and(|head| head.eq_ignore_ascii_case(stem)) {
            // The detail already says what the stem says ("upstream refused the gateway's
            // credentials (HTTP 403)"): said once, from its capital.
            format!("{stem}{}", &self.detail[stem.len()..])
        } else {
            format!("{stem}: {}", self.detail)
        };
        let mut data = Map::new();
        data.insert("category".into(), json!(self.category.as_str()));
        data.insert("retryable".into(), json!(self.category.retryable()));
        data.insert("tool".into(), json!(self.tool.as_deref()));
        data.insert("server".into(), json!(self.server.as_deref()));
        data.insert("attempts".into(), json!(self.attempts));
        if let Some(after) = self.retry_after {
            data.insert("retry_after_ms".into(), json!(after.as_millis() as u64));
        }
        if let Some(code) = self.upstream_code {
            data.insert("upstream_code".into(), json!(code));
        }
        if let Some(extra) = &self.extra {
            let (key, value) = extra.as_ref();
            data.insert((*key).into(), value.clone());
        }
        ErrorObject { code, message, data: Some(Value::Object(data)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_a_model_can_act_on_become_tool_execution_errors_naming_every_violation() {
        let violations = json!([
            {"path": "/title", "message": "\"\" is shorter than 1 character"},
            {"path": "/max_results", "message": "99 is greater than the maximum of 50"}
        ]);
        let bad = GatewayError::new(
            Category::BadInput,
            "arguments do not match the inputSchema of t (2 violation(s))",
        )
        .with_tool("t")
        .with_extra("violations", violations);
        let result: Value = serde_json::from_str(bad.to_tool_execution_error(false).unwrap().get()).unwrap();
        assert_eq!(result["isError"], true);
        let text = result["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with("Invalid params: arguments do not match the inputSchema of t"), "{text}");
        assert!(text.contains("\n- /title: \"\" is shorter than 1 character"), "{text}");
        assert!(text.contains("\n- /max_results: 99 is greater than the maximum of 50"), "{text}");
        let kept = &result["_meta"][TOOL_ERROR_META];
        assert_eq!(
            (kept["code"].as_i64(), kept["data"]["category"].as_str()),
            (Some(-32602), Some("bad_input"))
        );
        assert_eq!(kept["data"]["retryable"], false);
        // A guardrail's refusal and a policy denial are too; the rest stay protocol errors.
        assert!(GatewayError::new(Category::Guardrail, "x").to_tool_execution_error(false).is_some());
        assert!(GatewayError::new(Category::Forbidden, "x").to_tool_execution_error(false).is_some());
        assert!(
            GatewayError::new(Category::BadInput, "arguments must be an object")
                .to_tool_execution_error(false)
                .is_none()
        );
        assert!(GatewayError::new(Category::UnknownTool, "x").to_tool_execution_error(false).is_none());
        assert!(GatewayError::new(Category::Timeout, "x").to_tool_execution_error(false).is_none());
    }

    #[test]
    fn a_message_says_its_reason_once() {
        let refused = GatewayError::from_upstream(&crate::error::UpstreamError::Unauthorized { status: 403 });
        assert_eq!(
            refused.to_error_object().message,
            "Upstream refused the gateway's credentials (HTTP 403)"
        );
        let other =
            GatewayError::new(Category::Forbidden, "the tool policy does not allow this caller to call x");
        assert_eq!(
            other.to_error_object().message,
            "Forbidden: the tool policy does not allow this caller to call x"
        );
    }

    #[test]
    fn every_error_carries_the_documented_data_fields() {
        let err = GatewayError::new(Category::RateLimited, "HTTP 429")
            .with_tool("manga_search")
            .with_server("catalog")
            .with_attempts(1)
            .with_retry_after(Some(Duration::from_millis(1500)));
        let obj = err.to_error_object();
        assert_eq!(obj.code, -32003);
        let data = obj.data.unwrap();
        assert_eq!(data["category"], "rate_limited");
        assert_eq!(data["retryable"], true);
        assert_eq!(data["tool"], "manga_search");
        assert_eq!(data["server"], "catalog");
        assert_eq!(data["attempts"], 1);
        assert_eq!(data["retry_after_ms"], 1500);
    }

    #[test]
    fn a_modern_caller_gets_invalid_params_for_an_unknown_tool_and_the_rest_as_before() {
        let unknown = GatewayError::new(Category::UnknownTool, "no such tool");
        assert_eq!(unknown.to_error_object().code, -32002);
        assert_eq!(unknown.to_error_object_for(true).code, -32602);
        let no_resource = GatewayError::new(Category::ResourceNotFound, "no such resource");
        assert_eq!(no_resource.to_error_object().code, -32002);
        assert_eq!(no_resource.to_error_object_for(true).code, -32602, "SEP-2164");
        let renamed = [Category::UnknownTool, Category::ResourceNotFound];
        for category in Category::ALL.iter().filter(|c| !renamed.contains(c)) {
            let err = GatewayError::new(*category, "x");
            assert_eq!(err.to_error_object_for(true), err.to_error_object(), "{category:?}");
        }
        let mut rejected = GatewayError::new(Category::UpstreamRejected, "bad");
        rejected.upstream_code = Some(-32002);
        assert_eq!(rejected.to_error_object_for(true).code, -32002, "the upstream's own code");
    }

    #[test]
    fn upstream_rejections_keep_the_upstream_code() {
        let mut err = GatewayError::new(Category::UpstreamRejected, "bad");
        err.upstream_code = Some(-32602);
        assert_eq!(err.to_error_object().code, -32602);
        assert!(!err.category.retryable());
    }
}
