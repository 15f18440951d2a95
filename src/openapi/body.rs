//! A call's request body, built from the operation's body plan and the call's arguments: JSON,
//! `application/x-www-form-urlencoded`, `multipart/form-data` (framed by reqwest's multipart
//! form) or raw (`application/octet-stream`, `image/png`, …). A file argument is base64 in the
//! call: checked and decoded here (the input schema's `contentEncoding` is not enforced by
//! validation), its decoded size charged against the server's `max_request_bytes` before it is
//! decoded, and the whole body checked against the same bound: nothing over it is sent. Its own
//! module because files, parts and media types are a concern of their own beside the
//! parameters' encodings ([`super::request`]).

use base64::Engine;
use serde_json::{Map, Value};

use super::{
    encoding::{Invalid, encode, scalar},
    mapping::is_media_type,
    plan::{Body, BodyMedia, BodyShape, PartKind, PartPlan},
};

/// The body's `(content type, bytes)`, `None` when the arguments give none and it is optional.
pub(super) fn body_bytes(
    body: &Body,
    arguments: &Map<String, Value>,
    limit: usize,
) -> Result<Option<(String, Vec<u8>)>, Invalid> {
    let value = match &body.shape {
        BodyShape::Whole(property) => arguments.get(property).filter(|v| !v.is_null()).cloned(),
        BodyShape::Spread(names) => {
            let object: Map<String, Value> =
                names.iter().filter_map(|n| arguments.get(n).map(|v| (n.clone(), v.clone()))).collect();
            (!object.is_empty() || body.required).then_some(Value::Object(object))
        }
    };
    // How an argument of the body is named in errors: `cover`, or `body.cover` when whole.
    let label = |name: &str| match &body.shape {
        BodyShape::Whole(property) if name.is_empty() => property.clone(),
        BodyShape::Whole(property) => format!("{property}.{name}"),
        BodyShape::Spread(_) => name.to_string(),
    };
    let built = match (value, &body.media) {
        (None, _) if body.required => {
            let name = match &body.shape {
                BodyShape::Whole(property) => property.as_str(),
                BodyShape::Spread(_) => "body",
            };
            return Err(format!("missing required argument {name:?}"));
        }
        (None, _) => return Ok(None),
        (Some(value), BodyMedia::Json(content_type)) => {
            let bytes = serde_json::to_vec(&value).map_err(|e| format!("body not encoded: {e}"))?;
            (content_type.clone(), bytes)
        }
        (Some(Value::Object(fields)), BodyMedia::Form) => {
            let mut pairs = Vec::new();
            for (name, value) in &fields {
                match value {
                    Value::Null => {}
                    Value::Array(items) => {
                        pairs.extend(items.iter().map(|i| format!("{}={}", encode(name), encode(&scalar(i)))))
                    }
                    other => pairs.push(format!("{}={}", encode(name), encode(&scalar(other)))),
                }
            }
            ("application/x-www-form-urlencoded".to_string(), pairs.join("&").into_bytes())
        }
        (Some(_), BodyMedia::Form) => return Err("a form body must be an object".into()),
        (Some(Value::Object(fields)), BodyMedia::Multipart(plans)) => {
            let mut charged = 0usize;
            let mut parts = Vec::new();
            for plan in plans {
                let value = match fields.get(&plan.name) {
                    None | Some(Value::Null) => continue,
                    Some(value) => value,
                };
                let items: Vec<(String, &Value)> = match value {
                    Value::Array(items) => items
                        .iter()
                        .enumerate()
                        .map(|(i, v)| (format!("{}[{i}]", label(&plan.name)), v))
                        .collect(),
                    one => vec![(label(&plan.name), one)],
                };
                for (shown, item) in items {
                    parts.push(part(plan, &shown, item, limit, &mut charged)?);
                }
            }
            multipart(parts)?
        }
        (Some(_), BodyMedia::Multipart(_)) => {
            return Err("a multipart/form-data body must be an object".into());
        }
        (Some(value), BodyMedia::Raw(media_type)) => {
            let shown = label("");
            let mut charged = 0;
            let file = file_argument(&shown, &value, limit, &mut charged, false)?;
            (raw_media_type(&shown, media_type, file.media_type.as_deref())?, file.bytes)
        }
    };
    if built.1.len() > limit {
        return Err(format!(
            "the request body of {} bytes exceeds max_request_bytes ({limit}): not sent",
            built.1.len()
        ));
    }
    Ok(Some(built))
}

/// One file argument, decoded and checked.
struct File {
    bytes: Vec<u8>,
    media_type: Option<String>,
    filename: Option<String>,
}

/// The standard base64 alphabet, padding optional (models often drop it), nothing else
/// accepted: no URL-safe characters, no whitespace.
const BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

/// A file argument (`{data, mediaType?, filename?}`; a bare string is its `data`), its bytes
/// decoded (`keep_text`: checked but kept as the base64 text) and charged to `charged`, which
/// may not pass `limit`. `jsonschema` does not enforce `contentEncoding`: checked here.
fn file_argument(
    shown: &str,
    value: &Value,
    limit: usize,
    charged: &mut usize,
    keep_text: bool,
) -> Result<File, Invalid> {
    let (data, media_type, filename) = match value {
        Value::String(data) => (data.as_str(), None, None),
        Value::Object(map) => {
            let text = |key: &str| match map.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.as_str())),
                Some(_) => Err(format!("argument {shown:?}: {key} must be a string")),
            };
            let data = text("data")?
                .ok_or_else(|| format!("argument {shown:?}: a file needs `data` (its bytes as base64)"))?;
            (data, text("mediaType")?, text("filename")?)
        }
        _ => return Err(format!("argument {shown:?}: a file is an object {{data, mediaType, filename}}")),
    };
    // The decoded size is known before decoding: a file over the bound is refused unread.
    let padding = data.bytes().rev().take_while(|b| *b == b'=').count().min(2);
    let unpadded = data.len() - padding;
    let size = unpadded / 4 * 3 + (unpadded % 4).saturating_sub(1);
    let total = charged.saturating_add(size);
    if total > limit {
        return Err(match *charged {
            0 => format!(
                "argument {shown:?}: the file's {size} bytes exceed max_request_bytes ({limit}): not sent"
            ),
            before => format!(
                "argument {shown:?}: the file's {size} bytes after {before} bytes of other files exceed max_request_bytes ({limit}): not sent"
            ),
        });
    }
    let bytes = BASE64
        .decode(data)
        .map_err(|e| format!("argument {shown:?}: data is not base64 (RFC 4648 standard alphabet): {e}"))?;
    *charged = charged.saturating_add(bytes.len());
    if let Some(media_type) = media_type
        && (media_type.contains('*') || !is_media_type(media_type))
    {
        return Err(format!("argument {shown:?}: mediaType is not a single media type (type/subtype)"));
    }
    if let Some(name) = filename
        && (name.is_empty() || name.chars().any(char::is_control))
    {
        return Err(format!("argument {shown:?}: filename must be non-empty, without control characters"));
    }
    Ok(File {
        bytes: if keep_text { data.as_bytes().to_vec() } else { bytes },
        media_type: media_type.map(str::to_string),
        filename: filename.map(str::to_string),
    })
}

/// The media type a raw body is sent with: the document's; within a range (`image/*`, `*/*`)
/// the caller's `mediaType` (`application/octet-stream` for `*/*` without one). A caller's
/// type outside the document's is refused: the service said what it takes.
fn raw_media_type(shown: &str, document: &str, caller: Option<&str>) -> Result<String, Invalid> {
    let essence = |t: &str| t.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    let wanted = essence(document);
    let within = |t: &str| {
        let t = essence(t);
        match wanted.as_str() {
            "*/*" => true,
            range if range.ends_with("/*") => t.split('/').next() == range.split('/').next(),
            exact => t == exact,
        }
    };
    match caller {
        Some(given) if within(given) => {
            Ok(if wanted.contains('*') { given.to_string() } else { document.to_string() })
        }
        Some(_) => Err(format!("argument {shown:?}: mediaType is not within the operation's {document}")),
        None if wanted == "*/*" => Ok("application/octet-stream".into()),
        None if wanted.contains('*') => {
            Err(format!("argument {shown:?}: needs a mediaType within {document}"))
        }
        None => Ok(document.to_string()),
    }
}

/// One part of a multipart body, before framing.
struct Part {
    name: String,
    content_type: Option<String>,
    filename: Option<String>,
    bytes: Vec<u8>,
}

/// The part of one value (an item, for an array) of a multipart property.
fn part(
    plan: &PartPlan,
    shown: &str,
    value: &Value,
    limit: usize,
    charged: &mut usize,
) -> Result<Part, Invalid> {
    let name = plan.name.clone();
    match plan.kind {
        PartKind::File | PartKind::Base64File => {
            let file = file_argument(shown, value, limit, charged, plan.kind == PartKind::Base64File)?;
            Ok(Part {
                content_type: Some(
                    file.media_type
                        .or_else(|| plan.content_type.clone())
                        .unwrap_or_else(|| "application/octet-stream".into()),
                ),
                // A part without a file name is a plain field to most frameworks (Starlette,
                // Spring, multer): the part's name stands in.
                filename: Some(file.filename.unwrap_or_else(|| plan.name.clone())),
                bytes: file.bytes,
                name,
            })
        }
        PartKind::Text => {
            let (bytes, json) = match value {
                Value::String(s) => (s.clone().into_bytes(), false),
                Value::Object(_) | Value::Array(_) => {
                    (serde_json::to_vec(value).map_err(|e| format!("argument {shown:?}: {e}"))?, true)
                }
                other => (other.to_string().into_bytes(), false),
            };
            let content_type =
                plan.content_type.clone().or_else(|| json.then(|| "application/json".to_string()));
            Ok(Part { name, content_type, filename: None, bytes })
        }
    }
}

/// A `multipart/form-data` body (RFC 7578) framed by reqwest's multipart form: `(content
/// type with its boundary, bytes)`. Every part is in memory, so its stream is ready at once.
fn multipart(parts: Vec<Part>) -> Result<(String, Vec<u8>), Invalid> {
    use futures_util::{FutureExt, TryStreamExt};
    let mut form = reqwest::multipart::Form::new().percent_encode_noop();
    for part in parts {
        let mut framed = reqwest::multipart::Part::bytes(part.bytes);
        if let Some(content_type) = &part.content_type {
            framed = framed
                .mime_str(content_type)
                .map_err(|_| format!("part {:?}: its media type is not one", part.name))?;
        }
        if let Some(filename) = part.filename {
            framed = framed.file_name(filename);
        }
        form = form.part(part.name, framed);
    }
    let content_type = format!("multipart/form-data; boundary={}", form.boundary());
    let collected = form
        .into_stream()
        .try_fold(Vec::new(), |mut all, chunk| {
            all.extend_from_slice(&chunk);
            std::future::ready(Ok(all))
        })
        .now_or_never();
    match collected {
        Some(Ok(bytes)) => Ok((content_type, bytes)),
        _ => Err("the multipart body could not be framed".into()),
    }
}
