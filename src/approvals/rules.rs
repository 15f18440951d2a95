//! Which calls need a person's approval, from `[approvals] rules` (the Cedar policy's
//! `@approval("…")` annotation is read by `crate::policy::engine`). A rule matches when every
//! condition it sets holds: tool and server patterns, the tool's annotations, one argument of
//! the call as the server will see it (a JSON pointer compared with a value), the caller.

use serde_json::Value;

use crate::{
    config::{ApprovalRule, Approver, Comparison},
    guardrail::glob,
    identity::Caller,
    registry::ToolRecord,
};

/// Why a call waits: who approves, and what asked for it (a rule's name, or `cedar:<@id>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub approver: Approver,
    pub rule: String,
}

/// The first rule matching the call, if any.
pub fn matching(
    rules: &[ApprovalRule],
    caller: &Caller,
    tool: &ToolRecord,
    arguments: &Value,
) -> Option<Requirement> {
    rules
        .iter()
        .find(|rule| matches(rule, caller, tool, arguments))
        .map(|rule| Requirement { approver: rule.approver, rule: rule.name.clone() })
}

/// The stricter of two requirements (an operator's outranks the user's; the first on a tie).
pub fn stricter(a: Option<Requirement>, b: Option<Requirement>) -> Option<Requirement> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b.approver > a.approver { b } else { a }),
        (a, b) => a.or(b),
    }
}

fn matches(rule: &ApprovalRule, caller: &Caller, tool: &ToolRecord, arguments: &Value) -> bool {
    let any = |patterns: &[String], name: &str| patterns.is_empty() || patterns.iter().any(|p| glob(p, name));
    if !any(&rule.tools, &tool.name) || !any(&rule.servers, &tool.server) {
        return false;
    }
    let hint = |key: &str, default: bool| {
        tool.definition
            .head()
            .get("annotations")
            .and_then(|a| a.get(key))
            .and_then(Value::as_bool)
            .unwrap_or(default)
    };
    if rule.destructive.is_some_and(|want| hint("destructiveHint", true) != want) {
        return false;
    }
    if rule.read_only.is_some_and(|want| hint("readOnlyHint", false) != want) {
        return false;
    }
    if !rule.callers.is_empty() {
        let Some(subject) = caller.subject.as_deref() else { return false };
        if !rule.callers.iter().any(|p| glob(p, subject)) {
            return false;
        }
    }
    if !rule.groups.is_empty() && !caller.groups.iter().any(|g| rule.groups.contains(g)) {
        return false;
    }
    if let (Some(pointer), Some(op), Some(value)) = (&rule.argument, rule.op, &rule.value) {
        let Some(actual) = arguments.pointer(pointer) else { return false };
        if !compare(actual, op, value) {
            return false;
        }
    }
    true
}

/// `actual op expected`. Numbers compare as numbers (an integer and a float alike); `==` and
/// `!=` compare any JSON values; an ordering of a non-number is false (no match).
fn compare(actual: &Value, op: Comparison, expected: &Value) -> bool {
    let numbers = actual.as_f64().zip(expected.as_f64());
    match op {
        Comparison::Eq => numbers.map_or(actual == expected, |(a, b)| a == b),
        Comparison::Ne => numbers.map_or(actual != expected, |(a, b)| a != b),
        Comparison::Gt => numbers.is_some_and(|(a, b)| a > b),
        Comparison::Ge => numbers.is_some_and(|(a, b)| a >= b),
        Comparison::Lt => numbers.is_some_and(|(a, b)| a < b),
        Comparison::Le => numbers.is_some_and(|(a, b)| a <= b),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rule(text: &str) -> ApprovalRule {
        toml::from_str(text).unwrap()
    }

    fn checkout() -> ToolRecord {
        let definition = json!({"name": "checkout", "annotations": {"readOnlyHint": false}});
        ToolRecord::for_tests("checkout", "store", definition, false)
    }

    #[test]
    fn a_rule_matches_when_every_condition_holds() {
        let alice = Caller { subject: Some("alice".into()), ..Caller::default() };
        let big = rule(
            "name = \"big\"\ntools = [\"check*\"]\nargument = \"/total_jpy\"\nop = \">\"\nvalue = 20000\napprover = \"user\"\n",
        );
        let tool = checkout();
        assert!(matches(&big, &alice, &tool, &json!({"total_jpy": 20001})));
        assert!(matches(&big, &alice, &tool, &json!({"total_jpy": 20000.5})));
        assert!(!matches(&big, &alice, &tool, &json!({"total_jpy": 20000})), "not above");
        assert!(!matches(&big, &alice, &tool, &json!({"total_jpy": "99999"})), "a string is no amount");
        assert!(!matches(&big, &alice, &tool, &json!({})), "the pointer reaches nothing");
        // Absent hints are the specification's defaults: destructive.
        let destructive =
            rule("name = \"d\"\ndestructive = true\nread_only = false\napprover = \"operator\"\n");
        assert!(matches(&destructive, &alice, &tool, &json!({})));
        let callers = rule("name = \"c\"\ncallers = [\"bob\"]\napprover = \"operator\"\n");
        assert!(!matches(&callers, &alice, &tool, &json!({})));
        assert!(!matches(&callers, &Caller::default(), &tool, &json!({})), "anonymous is no subject");
        let equal =
            rule("name = \"e\"\nargument = \"/gift_wrap\"\nop = \"==\"\nvalue = true\napprover = \"user\"\n");
        assert!(matches(&equal, &alice, &tool, &json!({"gift_wrap": true})));
        assert!(!matches(&equal, &alice, &tool, &json!({"gift_wrap": false})));
    }

    #[test]
    fn the_operator_outranks_the_user() {
        let user = Some(Requirement { approver: Approver::User, rule: "a".into() });
        let operator = Some(Requirement { approver: Approver::Operator, rule: "b".into() });
        assert_eq!(stricter(user.clone(), operator.clone()), operator);
        assert_eq!(stricter(operator.clone(), user.clone()), operator);
        assert_eq!(stricter(None, user.clone()), user);
    }
}
