//! A call's HTTP request, built from the operation's plan and the call's arguments as the
//! document says: path parameters percent-encoded in their style (`simple`, `label`,
//! `matrix`), query parameters in theirs (`form` exploded or not, `spaceDelimited`,
//! `pipeDelimited`, `deepObject`), header and cookie parameters, and a JSON or
//! `application/x-www-form-urlencoded` body. Every name and value is percent-encoded except
//! the unreserved characters (RFC 3986), so an argument can never add a path segment, a query
//! parameter or a header of its own.
//!
//! Dot segments: `.` is unreserved, so encoding alone would send a value `..` as a `..`
//! segment, which any proxy or framework that resolves dot segments (RFC 3986 §5.2.4, the
//! WHATWG URL parser, `%2E` included) turns into another operation's path, one the operator
//! may have excluded. So, in every style: a path value with a `.` or `..` piece (between
//! `/` or `\\`, for servers that decode `%2F` before resolving) is refused, and so is a built
//! path with a `.`, `..` (plain or percent-encoded) or emptied segment. Refused, not
//! encoded: `%2E%2E` is a dot segment to WHATWG parsers too.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Map, Value};

use super::mapping::{BodyMedia, BodyShape, Operation, ParamIn, Style};

/// Everything but `A-Z a-z 0-9 - . _ ~` is encoded.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// The request of one call, before credentials are added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The path and query, to append to the base URL (`/products/42?limit=3`).
    pub path_and_query: String,
    pub headers: Vec<(String, String)>,
    /// `(name, value)`, each already encoded.
    pub cookies: Vec<(String, String)>,
    /// `(content type, bytes)`.
    pub body: Option<(String, Vec<u8>)>,
}

pub fn encode(text: &str) -> String {
    utf8_percent_encode(text, COMPONENT).to_string()
}

/// Why a call's arguments cannot make a request (answered as invalid params, nothing sent).
pub type Invalid = String;

pub fn build(op: &Operation, arguments: &Map<String, Value>) -> Result<Request, Invalid> {
    let mut path = op.path.clone();
    let mut query: Vec<String> = Vec::new();
    let mut headers = Vec::new();
    let mut cookies = Vec::new();
    for param in &op.params {
        let value = match arguments.get(&param.property) {
            None | Some(Value::Null) if param.required => {
                return Err(format!("missing required argument {:?}", param.property));
            }
            None | Some(Value::Null) => continue,
            Some(value) => value,
        };
        match param.location {
            ParamIn::Path => {
                no_dot_pieces(&param.property, value)?;
                let text = path_value(&param.name, param.style, param.explode, value);
                path = path.replace(&format!("{{{}}}", param.name), &text);
            }
            ParamIn::Query => query.extend(query_pairs(&param.name, param.style, param.explode, value)),
            ParamIn::Header => {
                let text = match param.style {
                    Style::Content => value.to_string(),
                    _ => joined(value, param.explode, ",", "=", |s| s.to_string()),
                };
                headers.push((param.name.clone(), text));
            }
            ParamIn::Cookie => {
                let text = match param.style {
                    Style::Content => encode(&value.to_string()),
                    _ => joined(value, false, ",", ",", encode),
                };
                cookies.push((encode(&param.name), text));
            }
        }
    }
    let body = match &op.body {
        None => None,
        Some(body) => {
            let value = match &body.shape {
                BodyShape::Whole(property) => arguments.get(property).filter(|v| !v.is_null()).cloned(),
                BodyShape::Spread(names) => {
                    let object: Map<String, Value> = names
                        .iter()
                        .filter_map(|n| arguments.get(n).map(|v| (n.clone(), v.clone())))
                        .collect();
                    (!object.is_empty() || body.required).then_some(Value::Object(object))
                }
            };
            match (value, &body.media) {
                (None, _) if body.required => {
                    let name = match &body.shape {
                        BodyShape::Whole(property) => property.as_str(),
                        BodyShape::Spread(_) => "body",
                    };
                    return Err(format!("missing required argument {name:?}"));
                }
                (None, _) => None,
                (Some(value), BodyMedia::Json(content_type)) => {
                    let bytes = serde_json::to_vec(&value).map_err(|e| format!("body not encoded: {e}"))?;
                    Some((content_type.clone(), bytes))
                }
                (Some(Value::Object(fields)), BodyMedia::Form) => {
                    let mut pairs = Vec::new();
                    for (name, value) in &fields {
                        match value {
                            Value::Null => {}
                            Value::Array(items) => pairs.extend(
                                items.iter().map(|i| format!("{}={}", encode(name), encode(&scalar(i)))),
                            ),
                            other => pairs.push(format!("{}={}", encode(name), encode(&scalar(other)))),
                        }
                    }
                    Some(("application/x-www-form-urlencoded".to_string(), pairs.join("&").into_bytes()))
                }
                (Some(_), BodyMedia::Form) => return Err("a form body must be an object".into()),
            }
        }
    };
    stays_in_template(&op.path, &path)?;
    let mut path_and_query = path;
    if !query.is_empty() {
        path_and_query.push('?');
        path_and_query.push_str(&query.join("&"));
    }
    Ok(Request { path_and_query, headers, cookies, body })
}

/// Refuses a path value any of whose texts (the value, an item, a key) has a `.` or `..`
/// piece between `/` or `\\`.
fn no_dot_pieces(property: &str, value: &Value) -> Result<(), Invalid> {
    let texts: Vec<String> = match value {
        Value::Array(items) => items.iter().map(scalar).collect(),
        Value::Object(map) => map.iter().flat_map(|(k, v)| [k.clone(), scalar(v)]).collect(),
        other => vec![scalar(other)],
    };
    let dotted = texts.iter().any(|text| text.split(['/', '\\']).any(|piece| piece == "." || piece == ".."));
    match dotted {
        true => Err(format!(
            "argument {property:?}: a path value cannot hold a \".\" or \"..\" segment (it would leave the operation's path)"
        )),
        false => Ok(()),
    }
}

/// Refuses a built path one of whose segments is a dot segment (`.`, `..`, or one spelt with
/// `%2E`), or empty where the template's is not: the request must reach the operation's path.
fn stays_in_template(template: &str, built: &str) -> Result<(), Invalid> {
    let is_dot = |segment: &str| {
        let decoded = percent_encoding::percent_decode_str(segment).decode_utf8_lossy();
        decoded == "." || decoded == ".."
    };
    let mut template_segments = template.split('/');
    for segment in built.split('/') {
        let from = template_segments.next().unwrap_or("");
        if is_dot(segment) {
            return Err("the request path would hold a \".\" or \"..\" segment: not sent".into());
        }
        if segment.is_empty() && !from.is_empty() {
            return Err("a path parameter's value is empty: not sent".into());
        }
    }
    Ok(())
}

/// A scalar as text (strings as they are, other JSON as its text).
fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A value as one text: a scalar encoded; an array's items joined by `sep`; an object's
/// `key{kv}value` pairs joined by `sep` when exploded, else keys and values alternating.
fn joined(value: &Value, explode: bool, sep: &str, kv: &str, enc: impl Fn(&str) -> String) -> String {
    match value {
        Value::Array(items) => items.iter().map(|i| enc(&scalar(i))).collect::<Vec<_>>().join(sep),
        Value::Object(map) if explode => map
            .iter()
            .map(|(k, v)| format!("{}{kv}{}", enc(k), enc(&scalar(v))))
            .collect::<Vec<_>>()
            .join(sep),
        Value::Object(map) => {
            map.iter().flat_map(|(k, v)| [enc(k), enc(&scalar(v))]).collect::<Vec<_>>().join(sep)
        }
        other => enc(&scalar(other)),
    }
}

fn path_value(name: &str, style: Style, explode: bool, value: &Value) -> String {
    match style {
        Style::Label => {
            let sep = if explode { "." } else { "," };
            format!(".{}", joined(value, explode, sep, "=", encode))
        }
        Style::Matrix => match value {
            Value::Array(items) if explode => {
                items.iter().map(|i| format!(";{}={}", encode(name), encode(&scalar(i)))).collect()
            }
            Value::Object(map) if explode => {
                map.iter().map(|(k, v)| format!(";{}={}", encode(k), encode(&scalar(v)))).collect()
            }
            other => format!(";{}={}", encode(name), joined(other, false, ",", ",", encode)),
        },
        Style::Content => encode(&value.to_string()),
        _ => joined(value, explode, ",", "=", encode),
    }
}

fn query_pairs(name: &str, style: Style, explode: bool, value: &Value) -> Vec<String> {
    let key = encode(name);
    match (style, value) {
        (Style::Content, value) => vec![format!("{key}={}", encode(&value.to_string()))],
        (Style::DeepObject, Value::Object(map)) => {
            map.iter().map(|(k, v)| format!("{key}%5B{}%5D={}", encode(k), encode(&scalar(v)))).collect()
        }
        (_, Value::Array(items)) if explode => {
            items.iter().map(|i| format!("{key}={}", encode(&scalar(i)))).collect()
        }
        (Style::Form, Value::Object(map)) if explode => {
            map.iter().map(|(k, v)| format!("{}={}", encode(k), encode(&scalar(v)))).collect()
        }
        (Style::SpaceDelimited, other) => {
            vec![format!("{key}={}", joined(other, false, "%20", "%20", encode))]
        }
        (Style::PipeDelimited, other) => vec![format!("{key}={}", joined(other, false, "|", "|", encode))],
        (_, other) => vec![format!("{key}={}", joined(other, false, ",", ",", encode))],
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::openapi::mapping::{Body, Param};

    fn param(property: &str, location: ParamIn, style: Style, explode: bool) -> Param {
        Param { property: property.into(), name: property.into(), location, style, explode, required: false }
    }

    fn op(path: &str, params: Vec<Param>, body: Option<Body>) -> Operation {
        Operation {
            tool: "t".into(),
            method: http::Method::GET,
            path: path.into(),
            operation_id: None,
            params,
            body,
            security: Vec::new(),
            wrap_result: false,
        }
    }

    fn args(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn path_values_cannot_add_segments() {
        let mut id = param("id", ParamIn::Path, Style::Simple, false);
        id.required = true;
        let op = op("/products/{id}", vec![id], None);
        let built = build(&op, &args(json!({"id": "a/admin?x=1 #é"}))).unwrap();
        assert_eq!(built.path_and_query, "/products/a%2Fadmin%3Fx%3D1%20%23%C3%A9");
        assert!(build(&op, &args(json!({"id": "../admin"}))).is_err(), "a dot segment, even encoded");
        assert_eq!(build(&op, &args(json!({}))).unwrap_err(), "missing required argument \"id\"");
    }

    #[test]
    fn dot_segments_are_refused_in_every_style() {
        let built = |path: &str, style, explode, value: Value| {
            let op = op(path, vec![param("v", ParamIn::Path, style, explode)], None);
            build(&op, &args(json!({"v": value}))).map(|b| b.path_and_query)
        };
        for (style, explode) in [
            (Style::Simple, false),
            (Style::Simple, true),
            (Style::Label, false),
            (Style::Label, true),
            (Style::Matrix, false),
            (Style::Matrix, true),
            (Style::Content, false),
        ] {
            for value in
                [json!(".."), json!("."), json!("a/../b"), json!("..\\x"), json!([".."]), json!({"k": ".."})]
            {
                let sent = built("/users/{v}/keys", style, explode, value.clone());
                assert!(sent.is_err(), "{style:?} explode={explode} {value}: {sent:?}");
            }
            assert!(built("/users/{v}/keys", style, explode, json!("a.b")).is_ok(), "{style:?}");
            assert!(built("/users/{v}/keys", style, explode, json!("...")).is_ok(), "{style:?}");
        }
        // Label style prefixes a dot: an empty value or items would make a dot segment.
        assert!(built("/users/{v}/keys", Style::Label, false, json!("")).is_err());
        assert!(built("/users/{v}/keys", Style::Label, true, json!(["", ""])).is_err());
        // Two values in one segment that together spell a dot segment.
        let op = op(
            "/users/{a}{b}/keys",
            vec![
                param("a", ParamIn::Path, Style::Simple, false),
                param("b", ParamIn::Path, Style::Simple, false),
            ],
            None,
        );
        assert!(build(&op, &args(json!({"a": ".", "b": "."}))).is_err());
        assert!(build(&op, &args(json!({"a": ".x", "b": "."}))).is_err());
        assert!(build(&op, &args(json!({"a": "x", "b": "y"}))).is_ok());
        // An emptied segment would reach another route; a dot segment in the template too.
        assert!(built("/users/{v}/keys", Style::Simple, false, json!("")).is_err());
        assert!(built("/users/%2e%2E/{v}", Style::Simple, false, json!("x")).is_err());
        assert_eq!(
            built("/users/{v}/keys", Style::Simple, false, json!("a/b")).unwrap(),
            "/users/a%2Fb/keys"
        );
    }

    #[test]
    fn query_styles() {
        let q = |style, explode, value: Value| {
            let op = op("/s", vec![param("tag", ParamIn::Query, style, explode)], None);
            build(&op, &args(json!({"tag": value}))).unwrap().path_and_query
        };
        assert_eq!(q(Style::Form, true, json!(["a b", "c"])), "/s?tag=a%20b&tag=c");
        assert_eq!(q(Style::Form, false, json!(["a", "c&d"])), "/s?tag=a,c%26d");
        assert_eq!(q(Style::Form, true, json!({"min": 1, "max": 5})), "/s?min=1&max=5");
        assert_eq!(q(Style::Form, false, json!({"min": 1})), "/s?tag=min,1");
        assert_eq!(q(Style::SpaceDelimited, false, json!(["a", "b"])), "/s?tag=a%20b");
        assert_eq!(q(Style::PipeDelimited, false, json!(["a", "b"])), "/s?tag=a|b");
        assert_eq!(
            q(Style::DeepObject, true, json!({"min": 1, "max": "x y"})),
            "/s?tag%5Bmin%5D=1&tag%5Bmax%5D=x%20y"
        );
        assert_eq!(q(Style::Form, true, json!(true)), "/s?tag=true");
        let uri: http::Uri =
            format!("http://h{}", q(Style::PipeDelimited, false, json!(["a", "b"]))).parse().unwrap();
        assert_eq!(uri.query(), Some("tag=a|b"));
    }

    #[test]
    fn path_styles() {
        let p = |style, explode, value: Value| {
            let op = op("/x/{v}", vec![param("v", ParamIn::Path, style, explode)], None);
            build(&op, &args(json!({"v": value}))).unwrap().path_and_query
        };
        assert_eq!(p(Style::Simple, false, json!([1, 2])), "/x/1,2");
        assert_eq!(p(Style::Simple, true, json!({"a": 1, "b": 2})), "/x/a=1,b=2");
        assert_eq!(p(Style::Label, false, json!(["a", "b"])), "/x/.a,b");
        assert_eq!(p(Style::Matrix, true, json!(["a", "b"])), "/x/;v=a;v=b");
        assert_eq!(p(Style::Matrix, false, json!("z")), "/x/;v=z");
    }

    #[test]
    fn bodies_json_and_form() {
        let json_body = Body {
            media: BodyMedia::Json("application/json".into()),
            shape: BodyShape::Spread(vec!["title".into(), "qty".into()]),
            required: true,
        };
        let built =
            build(&op("/o", vec![], Some(json_body)), &args(json!({"title": "鬼滅", "other": 1}))).unwrap();
        let expected = serde_json::to_vec(&json!({"title": "鬼滅"})).unwrap();
        assert_eq!(built.body, Some(("application/json".into(), expected)));
        let form = Body { media: BodyMedia::Form, shape: BodyShape::Whole("body".into()), required: false };
        let built =
            build(&op("/f", vec![], Some(form.clone())), &args(json!({"body": {"q": "a&b=c", "n": [1, 2]}})))
                .unwrap();
        assert_eq!(built.body.unwrap().1, b"q=a%26b%3Dc&n=1&n=2".to_vec());
        assert!(build(&op("/f", vec![], Some(form)), &args(json!({}))).unwrap().body.is_none());
    }
}
