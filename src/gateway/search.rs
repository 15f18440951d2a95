//! The search mode's meta-tools on the call path (`[catalogue.search] enabled = true`).
//!
//! `search_tools` answers from the index built with the catalogue snapshot
//! ([`crate::registry::search`]): the best-matching tools this caller may call (the tool policy
//! decides, as for `tools/list`; hidden tools are not in the catalogue at all; with
//! `hide_unavailable_tools`, tools of unavailable servers are left out), each with the
//! definition callers see. Nothing goes upstream. `call_tool` is unwrapped into a `tools/call`
//! of the tool it names and then goes the ordinary way — policy, validation, quotas, the
//! server's stack — so calling through it and calling by name are the same call.

use serde_json::{Map, Value, json, value::RawValue};

use super::{Gateway, capabilities};
use crate::{
    error::{Category, GatewayError},
    identity::Caller,
    registry::search::MAX_QUERY_CHARS,
    tool_control::{CALL_TOOL, META_TOOLS, SEARCH_TOOLS},
};

fn bad_input(tool: &str, detail: String) -> GatewayError {
    GatewayError::new(Category::BadInput, detail).with_tool(tool)
}

impl Gateway {
    /// `search_tools`: the tools matching `arguments.query` that `caller` may call, best first.
    pub(super) fn search_tools(
        &self,
        params: &Map<String, Value>,
        caller: &Caller,
    ) -> Result<Box<RawValue>, GatewayError> {
        let arguments = match params.get("arguments") {
            Some(Value::Object(arguments)) => arguments,
            _ => return Err(bad_input(SEARCH_TOOLS, "arguments must be an object with a query".into())),
        };
        let query = match arguments.get("query") {
            Some(Value::String(query))
                if !query.trim().is_empty() && query.chars().count() <= MAX_QUERY_CHARS =>
            {
                query
            }
            _ => {
                return Err(bad_input(
                    SEARCH_TOOLS,
                    format!(
                        "arguments.query must be a non-empty string of at most {MAX_QUERY_CHARS} characters"
                    ),
                ));
            }
        };
        let most = self.settings().config.catalogue.search.max_results;
        let wanted = match arguments.get("max_results") {
            None => most,
            Some(value) => match value.as_u64() {
                Some(n) if (1..=most as u64).contains(&n) => n as usize,
                _ => {
                    return Err(bad_input(
                        SEARCH_TOOLS,
                        format!("arguments.max_results must be an integer from 1 to {most}"),
                    ));
                }
            },
        };
        if let Some(unknown) = arguments.keys().find(|k| !["query", "max_results"].contains(&k.as_str())) {
            let shown: String = unknown.chars().take(64).collect();
            return Err(bad_input(SEARCH_TOOLS, format!("unknown argument {shown:?} (query, max_results)")));
        }
        let snapshot = self.catalog().snapshot();
        let Some(index) = snapshot.search_index() else {
            return Err(GatewayError::new(Category::UnknownTool, "tool search is not enabled")
                .with_tool(SEARCH_TOOLS));
        };
        let view = self.tool_view(caller);
        let unavailable = if self.settings().config.hide_unavailable_tools {
            capabilities::server_health(self)
                .into_iter()
                .filter(|(_, h)| h.availability == capabilities::Availability::Unavailable)
                .map(|(server, _)| server)
                .collect()
        } else {
            std::collections::BTreeSet::new()
        };
        let ranked = index.ranked(query);
        let matches = ranked.len();
        let found: Vec<Value> = ranked
            .into_iter()
            .filter(|(name, _)| view.as_ref().is_none_or(|v| v.shows(name)))
            .filter_map(|(name, _)| snapshot.get(name))
            .filter(|tool| !unavailable.contains(tool.server.as_ref()))
            .take(wanted)
            .map(|tool| view.as_ref().map_or_else(|| tool.definition.value(), |v| v.definition(tool)))
            .collect();
        tracing::debug!(query_chars = query.chars().count(), matches, returned = found.len(), "search_tools");
        let listing = json!({ "tools": found });
        let text = if found.is_empty() {
            format!("No tool matches {query:?}. Try other words.")
        } else {
            listing.to_string()
        };
        let result = json!({"content": [{"type": "text", "text": text}], "structuredContent": listing});
        serde_json::value::to_raw_value(&result)
            .map_err(|e| GatewayError::new(Category::Internal, format!("search answer: {e}")))
    }
}

/// `call_tool`'s params turned into those of a call of the tool it names: `name` and
/// `arguments` from its arguments, everything else (`_meta`, a multi-round-trip retry's
/// fields) kept.
pub(super) fn unwrap_call_tool(params: &mut Map<String, Value>) -> Result<(), GatewayError> {
    let mut arguments = match params.remove("arguments") {
        Some(Value::Object(arguments)) => arguments,
        _ => return Err(bad_input(CALL_TOOL, "arguments must be an object with the tool's name".into())),
    };
    let name = match arguments.remove("name") {
        Some(Value::String(name)) if !META_TOOLS.contains(&name.as_str()) => name,
        Some(Value::String(name)) => {
            return Err(bad_input(CALL_TOOL, format!("{name} is a meta-tool: call it directly")));
        }
        _ => return Err(bad_input(CALL_TOOL, "arguments.name must be the name of the tool to call".into())),
    };
    let inner = match arguments.remove("arguments") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(inner @ Value::Object(_)) => inner,
        Some(_) => return Err(bad_input(CALL_TOOL, "arguments.arguments must be an object".into())),
    };
    if let Some(unknown) = arguments.keys().next() {
        let shown: String = unknown.chars().take(64).collect();
        return Err(bad_input(CALL_TOOL, format!("unknown argument {shown:?} (name, arguments)")));
    }
    params.insert("name".into(), Value::String(name));
    params.insert("arguments".into(), inner);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn call_tool_becomes_the_named_tools_call_and_keeps_the_rest() {
        let mut p = params(json!({"name": "call_tool", "arguments": {"name": "price_lookup",
            "arguments": {"manga_id": "MNG-1"}}, "_meta": {"k": "v"}, "requestState": "s"}));
        unwrap_call_tool(&mut p).unwrap();
        assert_eq!(
            Value::Object(p),
            json!({"name": "price_lookup", "arguments": {"manga_id": "MNG-1"}, "_meta": {"k": "v"}, "requestState": "s"})
        );
        let mut bare = params(json!({"name": "call_tool", "arguments": {"name": "checkout"}}));
        unwrap_call_tool(&mut bare).unwrap();
        assert_eq!(bare["arguments"], json!({}));
        for broken in [
            json!({"name": "call_tool"}),
            json!({"name": "call_tool", "arguments": {"name": 3}}),
            json!({"name": "call_tool", "arguments": {"name": "call_tool"}}),
            json!({"name": "call_tool", "arguments": {"name": "x", "arguments": [1]}}),
            json!({"name": "call_tool", "arguments": {"name": "x", "args": {}}}),
        ] {
            let err = unwrap_call_tool(&mut params(broken.clone())).unwrap_err();
            assert_eq!(err.category, Category::BadInput, "{broken}");
        }
    }
}
