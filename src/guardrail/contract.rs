//! The contract of a hook that is an MCP tool: the arguments the gateway calls it with, and
//! the answer it must give (`docs/hooks.md#the-hook-tool-contract`).
//!
//! In: `{kind, phase, hook, tool, server, arguments, result?, caller: {subject, scopes,
//! groups}}` — never a token, a session id or a claim beyond those. `kind` says what passes
//! ([`ItemKind`]); `tool` names it: the tool, or a federated item (the prompt's name, the
//! resource's URI, the completion's prompt name or template), so a hook written for tools
//! keeps reading the same fields. Out (its `structuredContent`, or
//! else its first text block read as JSON): `{decision: "allow"|"deny"|"replace", reason?,
//! arguments?|result?}`. A tool error (`isError`), a JSON-RPC error or anything else is a
//! failure of the hook (its `failure` mode decides).

use serde_json::{Map, Value, json};

use crate::{config::hooks::HookPhase, identity::Caller};

/// Longest reason a hook's denial passes on to the caller, in characters.
pub const MAX_REASON_CHARS: usize = 512;

/// What a hook decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Allow,
    Deny {
        reason: Option<String>,
    },
    /// Before: the new arguments; after: the new result.
    Replace(Value),
}

/// What a hook is shown: a tool call's arguments and result, or an item of a federated method
/// (`docs/hooks.md#what-each-kind-gives-a-hook`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemKind {
    /// `tools/call`: arguments, then the `CallToolResult`.
    Tool,
    /// `resources/read`: no arguments (`{uri}`), then the `ReadResourceResult`.
    Resource,
    /// `prompts/get`: the prompt's arguments (strings), then the `GetPromptResult`.
    Prompt,
    /// `completion/complete`: `{argument, context?}`, then the `CompleteResult`.
    Completion,
}

impl ItemKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tool => "tool",
            Self::Resource => "resource",
            Self::Prompt => "prompt",
            Self::Completion => "completion",
        }
    }
}

/// The arguments of a hook tool's call.
#[allow(clippy::too_many_arguments)]
pub fn hook_input(
    phase: HookPhase,
    hook: &str,
    kind: ItemKind,
    name: &str,
    server: &str,
    arguments: &Value,
    result: Option<&Value>,
    caller: &Caller,
) -> Map<String, Value> {
    let mut input = Map::new();
    input.insert("kind".into(), json!(kind.as_str()));
    input.insert("phase".into(), json!(phase.as_str()));
    input.insert("hook".into(), json!(hook));
    input.insert("tool".into(), json!(name));
    input.insert("server".into(), json!(server));
    input.insert("arguments".into(), arguments.clone());
    if let Some(result) = result {
        input.insert("result".into(), result.clone());
    }
    input.insert(
        "caller".into(),
        json!({
            "subject": caller.subject.as_deref(),
            "scopes": caller.scopes,
            "groups": caller.groups,
        }),
    );
    input
}

/// Reads a hook tool's `tools/call` result as its verdict; `Err` says why it is no answer.
pub fn read_verdict(phase: HookPhase, result: &Value) -> Result<Verdict, String> {
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        return Err("the hook tool answered with isError".into());
    }
    let parsed;
    // An SDK may wrap a returned object (`{"result": …}`): then the text block is read.
    let answer = match result.get("structuredContent") {
        Some(structured @ Value::Object(map)) if map.contains_key("decision") => structured,
        _ => {
            let text = result
                .get("content")
                .and_then(Value::as_array)
                .and_then(|blocks| {
                    blocks.iter().find(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                })
                .and_then(|block| block.get("text"))
                .and_then(Value::as_str)
                .ok_or("the hook's answer has neither structuredContent nor a text block")?;
            parsed = serde_json::from_str::<Value>(text)
                .map_err(|_| "the hook's text answer is not JSON".to_string())?;
            &parsed
        }
    };
    let decision =
        answer.get("decision").and_then(Value::as_str).ok_or("the hook's answer has no decision")?;
    match decision {
        "allow" => Ok(Verdict::Allow),
        "deny" => {
            let reason = answer
                .get("reason")
                .and_then(Value::as_str)
                .map(|r| r.chars().take(MAX_REASON_CHARS).collect::<String>());
            Ok(Verdict::Deny { reason })
        }
        "replace" => {
            let key = match phase {
                HookPhase::Before => "arguments",
                HookPhase::After => "result",
            };
            match answer.get(key) {
                Some(value @ Value::Object(_)) => Ok(Verdict::Replace(value.clone())),
                _ => Err(format!(
                    "a replacing hook's answer needs `{key}` (an object) in phase {}",
                    phase.as_str()
                )),
            }
        }
        _ => Err("the hook's decision is not allow, deny or replace".into()),
    }
}

/// Checks a before-hook's replacement arguments of a federated item: a prompt's are an object
/// of strings (`GetPromptRequest.arguments`); a completion's keep an `argument` with a string
/// `name` and `value`, and an optional `context` object.
pub fn check_item_arguments(kind: ItemKind, arguments: Value) -> Result<Value, String> {
    match kind {
        ItemKind::Prompt => match &arguments {
            Value::Object(map) if map.values().all(Value::is_string) => Ok(arguments),
            _ => Err("a prompt's arguments are an object of strings".into()),
        },
        ItemKind::Completion => {
            let named = arguments.pointer("/argument/name").is_some_and(Value::is_string)
                && arguments.pointer("/argument/value").is_some_and(Value::is_string);
            let context = arguments.get("context").is_none_or(Value::is_object);
            if named && context {
                Ok(arguments)
            } else {
                Err("a completion's arguments need argument.name and argument.value (strings)".into())
            }
        }
        ItemKind::Tool | ItemKind::Resource => Err("no arguments to replace".into()),
    }
}

/// Checks a replacement result as an upstream's `tools/call` result is read: an object whose
/// `content` is an array of blocks with a string `type`, an optional object
/// `structuredContent` and an optional boolean `isError`.
pub fn check_result(result: &Value) -> Result<(), String> {
    let Some(object) = result.as_object() else { return Err("the result is not an object".into()) };
    let Some(Value::Array(blocks)) = object.get("content") else {
        return Err("the result has no content array".into());
    };
    if !blocks.iter().all(|b| b.get("type").is_some_and(Value::is_string)) {
        return Err("a content block has no string type".into());
    }
    if object.get("structuredContent").is_some_and(|s| !s.is_object()) {
        return Err("structuredContent is not an object".into());
    }
    if object.get("isError").is_some_and(|e| !e.is_boolean()) {
        return Err("isError is not a boolean".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_come_from_structured_content_or_text_json() {
        let structured = json!({"content": [], "structuredContent": {"decision": "deny", "reason": "no"}});
        assert_eq!(
            read_verdict(HookPhase::Before, &structured),
            Ok(Verdict::Deny { reason: Some("no".into()) })
        );
        let text = json!({"content": [{"type": "text", "text": "{\"decision\":\"allow\"}"}]});
        assert_eq!(read_verdict(HookPhase::After, &text), Ok(Verdict::Allow));
        let replace = json!({"structuredContent": {"decision": "replace", "arguments": {"q": 1}}});
        assert_eq!(read_verdict(HookPhase::Before, &replace), Ok(Verdict::Replace(json!({"q": 1}))));
        assert!(read_verdict(HookPhase::After, &replace).is_err(), "after needs a result");
        assert!(read_verdict(HookPhase::Before, &json!({"isError": true, "content": []})).is_err());
        assert!(
            read_verdict(HookPhase::Before, &json!({"structuredContent": {"decision": "maybe"}})).is_err()
        );
    }

    #[test]
    fn the_caller_goes_without_its_token() {
        let caller =
            Caller { subject: Some("alice".into()), token: Some("secret-token".into()), ..Caller::default() };
        let input = hook_input(HookPhase::Before, "h", ItemKind::Tool, "t", "s", &json!({}), None, &caller);
        let text = serde_json::to_string(&input).unwrap();
        assert!(!text.contains("secret-token"), "{text}");
        assert_eq!(input["caller"]["subject"], "alice");
    }

    #[test]
    fn replacement_results_are_checked_like_upstream_results() {
        assert!(check_result(&json!({"content": [{"type": "text", "text": "x"}]})).is_ok());
        assert!(check_result(&json!({"content": "x"})).is_err());
        assert!(check_result(&json!({"content": [{"text": "x"}]})).is_err());
        assert!(check_result(&json!({"content": [], "structuredContent": 3})).is_err());
    }
}
