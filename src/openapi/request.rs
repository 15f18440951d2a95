//! A call's HTTP request, built from the operation's plan and the call's arguments as the
//! document says: path parameters percent-encoded in their style (`simple`, `label`,
//! `matrix`), query parameters in theirs (`form` exploded or not, `spaceDelimited`,
//! `pipeDelimited`, `deepObject`), header and cookie parameters, and the body ([`super::body`]:
//! JSON, forms, multipart with files, raw bytes; nothing over `max_request_bytes` is sent).
//! Every name and value is percent-encoded except
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

use serde_json::{Map, Value};

pub use super::encoding::{Invalid, encode};
use super::{
    encoding::scalar,
    plan::{Operation, ParamIn, Style},
};

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

/// The request of one call; its body (files decoded) within `max_body_bytes`.
pub fn build(
    op: &Operation,
    arguments: &Map<String, Value>,
    max_body_bytes: usize,
) -> Result<Request, Invalid> {
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
        Some(body) => super::body::body_bytes(body, arguments, max_body_bytes)?,
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
    use crate::openapi::plan::{Body, BodyMedia, BodyShape, Param, PartKind, PartPlan};

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

    /// Built without a body bound.
    fn build(op: &Operation, arguments: &Map<String, Value>) -> Result<Request, Invalid> {
        super::build(op, arguments, usize::MAX)
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

    fn multipart_op(plans: Vec<PartPlan>, required: bool) -> Operation {
        let names = plans.iter().map(|p| p.name.clone()).collect();
        let body = Body { media: BodyMedia::Multipart(plans), shape: BodyShape::Spread(names), required };
        op("/up", vec![], Some(body))
    }

    fn plan(name: &str, kind: PartKind, content_type: Option<&str>) -> PartPlan {
        PartPlan { name: name.into(), kind, content_type: content_type.map(str::to_string) }
    }

    /// The parts of a multipart body: (headers, content) per part, split at its boundary.
    fn parts(content_type: &str, body: &[u8]) -> Vec<(String, Vec<u8>)> {
        let boundary = format!("--{}", content_type.split("boundary=").nth(1).unwrap());
        assert!(body.ends_with(format!("{boundary}--\r\n").as_bytes()));
        let find = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).position(|w| w == needle);
        let mut found = Vec::new();
        let mut rest = body;
        while let Some(at) = find(rest, boundary.as_bytes()) {
            let after = &rest[at + boundary.len()..];
            if let Some(part) = after.strip_prefix(b"\r\n") {
                let end = find(part, boundary.as_bytes()).unwrap();
                let part = &part[..end - 2];
                let split = find(part, b"\r\n\r\n").unwrap();
                found.push((String::from_utf8(part[..split].to_vec()).unwrap(), part[split + 4..].to_vec()));
            }
            rest = after;
        }
        found
    }

    #[test]
    fn multipart_bodies_carry_files_text_and_json_parts() {
        let op = multipart_op(
            vec![
                plan("cover", PartKind::File, None),
                plan("pages", PartKind::File, Some("image/jpeg")),
                plan("signed", PartKind::Base64File, None),
                plan("caption", PartKind::Text, None),
                plan("tags", PartKind::Text, None),
                plan("meta", PartKind::Text, None),
            ],
            true,
        );
        let built = build(
            &op,
            &args(json!({
                "cover": {"data": "iVBORw0KGgo=", "mediaType": "image/png", "filename": "cover 1.png"},
                "pages": [{"data": "AAEC"}, "/w"],
                "signed": {"data": "aGk"},
                "caption": "鬼滅 \"vol\" 1",
                "tags": ["a", 2],
                "meta": {"w": 3},
                "ignored": "x"
            })),
        )
        .unwrap();
        let (content_type, body) = built.body.unwrap();
        assert!(content_type.starts_with("multipart/form-data; boundary="), "{content_type}");
        let got = parts(&content_type, &body);
        let heads: Vec<&str> = got.iter().map(|(h, _)| h.as_str()).collect();
        assert_eq!(
            heads,
            [
                "Content-Disposition: form-data; name=\"cover\"; filename=\"cover 1.png\"\r\nContent-Type: image/png",
                "Content-Disposition: form-data; name=\"pages\"; filename=\"pages\"\r\nContent-Type: image/jpeg",
                "Content-Disposition: form-data; name=\"pages\"; filename=\"pages\"\r\nContent-Type: image/jpeg",
                "Content-Disposition: form-data; name=\"signed\"; filename=\"signed\"\r\nContent-Type: application/octet-stream",
                "Content-Disposition: form-data; name=\"caption\"",
                "Content-Disposition: form-data; name=\"tags\"",
                "Content-Disposition: form-data; name=\"tags\"",
                "Content-Disposition: form-data; name=\"meta\"\r\nContent-Type: application/json",
            ]
        );
        assert_eq!(got[0].1, b"\x89PNG\r\n\x1a\n".to_vec(), "decoded");
        assert_eq!(got[1].1, vec![0, 1, 2]);
        assert_eq!(got[2].1, vec![0xff], "a bare string is the data; padding optional");
        assert_eq!(got[3].1, b"aGk".to_vec(), "contentEncoding base64: the text as given");
        assert_eq!(got[4].1, "鬼滅 \"vol\" 1".as_bytes());
        assert_eq!((got[5].1.clone(), got[6].1.clone()), (b"a".to_vec(), b"2".to_vec()));
        assert_eq!(got[7].1, br#"{"w":3}"#.to_vec());
    }

    #[test]
    fn file_arguments_are_checked_and_bounded_before_anything_is_built() {
        let op =
            multipart_op(vec![plan("cover", PartKind::File, None), plan("back", PartKind::File, None)], true);
        let within = |value: Value, limit| super::build(&op, &args(value), limit).map(|_| ());
        let err = |value: Value, limit| within(value, limit).unwrap_err();
        assert_eq!(
            err(json!({"cover": {"data": "AAE$"}}), 100),
            "argument \"cover\": data is not base64 (RFC 4648 standard alphabet): Invalid symbol 36, offset 3."
        );
        assert!(err(json!({"cover": {"data": "AA-_"}}), 100).contains("not base64"), "no URL-safe alphabet");
        assert!(err(json!({"cover": {"data": "AA E"}}), 100).contains("not base64"), "no whitespace");
        // 12 base64 characters are 9 bytes: over a bound of 8, refused (before decoding: the
        // same text with a bad character says the size, not the alphabet).
        assert_eq!(
            err(json!({"cover": {"data": "AAAAAAAAAAA$"}}), 8),
            "argument \"cover\": the file's 9 bytes exceed max_request_bytes (8): not sent"
        );
        assert!(within(json!({"cover": {"data": "AAAAAAAA"}}), 1000).is_ok());
        // Files are charged together.
        assert_eq!(
            err(json!({"cover": "AAAAAAAA", "back": "AAAAAAAA"}), 10),
            "argument \"back\": the file's 6 bytes after 6 bytes of other files exceed max_request_bytes (10): not sent"
        );
        // The framed body is bounded too: 6 bytes of file, but the framing takes more.
        assert!(
            err(json!({"cover": "AAAAAAAA"}), 64).starts_with("the request body of "),
            "{}",
            err(json!({"cover": "AAAAAAAA"}), 64)
        );
        assert!(
            err(json!({"cover": {"data": "AA==", "filename": "a\r\nX-Evil: 1"}}), 1000).contains("filename")
        );
        assert!(
            err(json!({"cover": {"data": "AA==", "mediaType": "image/png\r\nX: 1"}}), 1000)
                .contains("mediaType")
        );
        assert!(err(json!({"cover": {"data": "AA==", "mediaType": "image/*"}}), 1000).contains("mediaType"));
        assert!(err(json!({"cover": {"mediaType": "image/png"}}), 1000).contains("needs `data`"));
        assert!(err(json!({"cover": 3}), 1000).contains("a file is an object"));
    }

    #[test]
    fn raw_bodies_are_the_files_bytes_with_the_documents_media_type() {
        let raw = |media: &str, required| {
            let body = Body {
                media: BodyMedia::Raw(media.into()),
                shape: BodyShape::Whole("body".into()),
                required,
            };
            op("/raw", vec![], Some(body))
        };
        let sent = |media: &str, value: Value| {
            build(&raw(media, true), &args(json!({"body": value}))).map(|b| b.body)
        };
        assert_eq!(
            sent("application/octet-stream", json!({"data": "AAEC"})).unwrap(),
            Some(("application/octet-stream".into(), vec![0, 1, 2]))
        );
        assert_eq!(
            sent("image/*", json!({"data": "AAEC", "mediaType": "image/png"})).unwrap(),
            Some(("image/png".into(), vec![0, 1, 2])),
            "a range takes the caller's type"
        );
        assert_eq!(
            sent("*/*", json!("AAEC")).unwrap(),
            Some(("application/octet-stream".into(), vec![0, 1, 2]))
        );
        assert!(
            sent("image/*", json!({"data": "AAEC"}))
                .unwrap_err()
                .contains("needs a mediaType within image/*")
        );
        assert_eq!(
            sent("image/png", json!({"data": "AAEC", "mediaType": "text/html"})).unwrap_err(),
            "argument \"body\": mediaType is not within the operation's image/png"
        );
        assert_eq!(
            super::build(&raw("image/png", true), &args(json!({"body": "AAECAw"})), 3).unwrap_err(),
            "argument \"body\": the file's 4 bytes exceed max_request_bytes (3): not sent"
        );
        assert_eq!(
            build(&raw("image/png", true), &args(json!({}))).unwrap_err(),
            "missing required argument \"body\""
        );
        assert!(build(&raw("image/png", false), &args(json!({}))).unwrap().body.is_none());
    }
}
