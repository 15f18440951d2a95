//! The text a request is made of: every name and value percent-encoded but the unreserved
//! characters (RFC 3986), so an argument can never add a path segment, a query parameter or a
//! header of its own; a scalar's text; and why a call's arguments make no request. Shared by the
//! parameters' encodings ([`super::request`]) and the body's ([`super::body`]).

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::Value;

/// Everything but `A-Z a-z 0-9 - . _ ~` is encoded.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// `text` percent-encoded (everything but the unreserved characters).
pub fn encode(text: &str) -> String {
    utf8_percent_encode(text, COMPONENT).to_string()
}

/// Why a call's arguments cannot make a request (answered as invalid params, nothing sent).
pub type Invalid = String;

/// A scalar as text (strings as they are, other JSON as its text).
pub fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}
