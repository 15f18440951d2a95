//! What an upstream may cause to appear on a caller's event stream, as typed values the
//! gateway rebuilt from validated fields — never the upstream's own JSON.
//!
//! Why: a caller's event stream is trusted by its client (SDK clients match responses by id
//! and act on requests). An upstream is not trusted with it: if the `params` of its
//! notifications were written out as they came, it could put a forged response under another
//! request's id, or an `elicitation/create` to a caller that never declared elicitation, onto
//! the stream. So a call's notification channel carries [`ToCaller`], never JSON:
//!
//! - [`ProgressUpdate`]: `progress` (a number), `total` (a number, optional), `message` (a
//!   string, optional), nothing else. The inbound side writes it as `notifications/progress`
//!   under the CALLER's own `progressToken`.
//! - [`LogEntry`]: `level` (one of the eight MCP levels), `logger` (a string, optional),
//!   `data`. Written as `notifications/message`.
//! - [`RelayedRequest`]: a server→client request the relay ([`super::relay`]) made for a
//!   caller whose session declared the capability it needs. Its fields are private to that
//!   module, so nothing else (no transport, no upstream message) can make one.
//!
//! Anything else an upstream sends (other keys in the params, other methods, requests it sends
//! outside the relay) never reaches the caller.

use serde_json::{Map, Number, Value, json};

/// One item for a caller's event stream.
#[derive(Debug)]
pub enum ToCaller {
    Progress(ProgressUpdate),
    Log(LogEntry),
    Request(RelayedRequest),
}

/// The validated fields of an upstream `notifications/progress` (its token is the gateway's;
/// the caller's is put in when written out).
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressUpdate {
    progress: Number,
    total: Option<Number>,
    message: Option<String>,
}

impl ProgressUpdate {
    /// The update in an upstream notification's `params`; `None` when `progress` is not a
    /// number, or `total`/`message` are present with the wrong type.
    pub fn from_params(params: &Map<String, Value>) -> Option<Self> {
        let Value::Number(progress) = params.get("progress")? else { return None };
        let progress = progress.clone();
        let total = match params.get("total") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => Some(n.clone()),
            Some(_) => return None,
        };
        let message = match params.get("message") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return None,
        };
        Some(Self { progress, total, message })
    }

    pub fn progress(&self) -> f64 {
        self.progress.as_f64().unwrap_or(0.0)
    }

    /// The update's message, for the gateway's outbound step to redact or drop (its numbers
    /// stay as validated).
    pub fn message_mut(&mut self) -> &mut Option<String> {
        &mut self.message
    }

    /// The whole `notifications/progress` for the caller that gave `caller_token`.
    pub fn to_notification(&self, caller_token: &Value) -> Value {
        let mut params = Map::new();
        params.insert("progressToken".into(), caller_token.clone());
        params.insert("progress".into(), Value::Number(self.progress.clone()));
        if let Some(total) = &self.total {
            params.insert("total".into(), Value::Number(total.clone()));
        }
        if let Some(message) = &self.message {
            params.insert("message".into(), Value::String(message.clone()));
        }
        json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
    }
}

/// The validated fields of an upstream `notifications/message` (a log entry).
#[derive(Debug, Clone, PartialEq)]
pub struct LogEntry {
    level: &'static str,
    logger: Option<String>,
    data: Value,
}

impl LogEntry {
    /// The entry in an upstream notification's `params`; `None` when `level` is not one of the
    /// eight levels, `logger` is present and not a string, or `data` is missing.
    pub fn from_params(params: &Map<String, Value>) -> Option<Self> {
        let wanted = params.get("level")?.as_str()?;
        let level = LOG_LEVELS.iter().find(|l| **l == wanted).copied()?;
        let logger = match params.get("logger") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return None,
        };
        let data = params.get("data")?.clone();
        Some(Self { level, logger, data })
    }

    pub fn level(&self) -> &'static str {
        self.level
    }

    /// The entry's data, for the gateway's outbound step to redact.
    pub fn data_mut(&mut self) -> &mut Value {
        &mut self.data
    }

    /// The whole `notifications/message` for the caller.
    pub fn to_notification(&self) -> Value {
        let mut params = Map::new();
        params.insert("level".into(), Value::String(self.level.into()));
        if let Some(logger) = &self.logger {
            params.insert("logger".into(), Value::String(logger.clone()));
        }
        params.insert("data".into(), self.data.clone());
        json!({"jsonrpc": "2.0", "method": "notifications/message", "params": params})
    }
}

/// MCP log levels, least severe first (RFC 5424 order).
pub const LOG_LEVELS: [&str; 8] =
    ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

/// A server→client request on its way to the caller: only the relay
/// ([`super::relay::Relay::ask`]) makes one (its fields are private; its one constructor is
/// named for that and visible to the back-channel room alone), with a fresh id the gateway minted and a
/// method the caller's session declared the capability for. The upstream's own id never reaches the
/// caller; its `params` are what the caller is asked.
#[derive(Debug)]
pub struct RelayedRequest {
    id: String,
    method: &'static str,
    params: Option<Value>,
}

impl RelayedRequest {
    /// For [`super::relay::Relay::ask`] only: the id it minted, the relayable method the
    /// caller's session declared, the upstream's params.
    pub(super) fn made_by_the_relay(id: String, method: &'static str, params: Option<Value>) -> Self {
        Self { id, method, params }
    }

    /// The gateway-minted id the caller answers under.
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn method(&self) -> &'static str {
        self.method
    }

    /// What the caller is asked, for the gateway's outbound step to redact (the id and method
    /// stay the relay's).
    pub fn params_mut(&mut self) -> Option<&mut Value> {
        self.params.as_mut()
    }

    /// The whole JSON-RPC request for the caller's event stream.
    pub fn to_message(&self) -> Value {
        let mut message = Map::new();
        message.insert("jsonrpc".into(), json!("2.0"));
        message.insert("id".into(), json!(self.id));
        message.insert("method".into(), json!(self.method));
        if let Some(params) = &self.params {
            message.insert("params".into(), params.clone());
        }
        Value::Object(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(value: Value) -> Map<String, Value> {
        value.as_object().cloned().expect("an object")
    }

    #[test]
    fn progress_keeps_only_its_fields_and_takes_the_callers_token() {
        let forged = params(json!({"progressToken": "mcp-gateway-1", "progress": 2, "total": 4,
            "message": "half", "jsonrpc": "2.0", "id": 7, "result": {"tools": []}, "method": "tools/list"}));
        let update = ProgressUpdate::from_params(&forged).expect("valid fields");
        assert_eq!(
            update.to_notification(&json!("mine")),
            json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": "mine", "progress": 2, "total": 4, "message": "half"}})
        );
        for bad in [
            json!({"progress": "2"}),
            json!({"progress": 1, "total": "x"}),
            json!({"progress": 1, "message": 5}),
            json!({}),
        ] {
            assert_eq!(ProgressUpdate::from_params(&params(bad.clone())), None, "{bad}");
        }
    }

    #[test]
    fn a_log_entry_keeps_only_level_logger_and_data() {
        let forged = params(json!({"level": "info", "logger": "db", "data": {"x": 1},
            "jsonrpc": "2.0", "id": "mcpgw-relay-1", "method": "elicitation/create"}));
        let entry = LogEntry::from_params(&forged).expect("valid fields");
        assert_eq!(
            entry.to_notification(),
            json!({"jsonrpc": "2.0", "method": "notifications/message",
                "params": {"level": "info", "logger": "db", "data": {"x": 1}}})
        );
        for bad in [
            json!({"level": "loud", "data": 1}),
            json!({"level": "info"}),
            json!({"level": "info", "logger": 1, "data": 1}),
        ] {
            assert_eq!(LogEntry::from_params(&params(bad.clone())), None, "{bad}");
        }
    }
}
