//! A tool's call plan: what a call of an OpenAPI tool needs to build its request (where each
//! parameter goes and in which style, the body's media type and shape, the multipart parts and
//! file arguments, the security requirements). Made by the mapping ([`super::mapping`]), kept
//! per tool once the document is dropped, and read by the request's encodings
//! ([`super::request`], [`super::body`]) and the OpenAPI transport.

use http::Method;

/// Where a parameter goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamIn {
    Path,
    Query,
    Header,
    Cookie,
}

impl ParamIn {
    pub(super) fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "path" => ParamIn::Path,
            "query" => ParamIn::Query,
            "header" => ParamIn::Header,
            "cookie" => ParamIn::Cookie,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ParamIn::Path => "path",
            ParamIn::Query => "query",
            ParamIn::Header => "header",
            ParamIn::Cookie => "cookie",
        }
    }
}

/// A parameter's serialisation (OpenAPI `style`), or `Content` for a parameter described by a
/// media type (its value sent as JSON text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Simple,
    Label,
    Matrix,
    Form,
    SpaceDelimited,
    PipeDelimited,
    DeepObject,
    Content,
}

impl Style {
    pub(super) fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "simple" => Style::Simple,
            "label" => Style::Label,
            "matrix" => Style::Matrix,
            "form" => Style::Form,
            "spaceDelimited" => Style::SpaceDelimited,
            "pipeDelimited" => Style::PipeDelimited,
            "deepObject" => Style::DeepObject,
            _ => return None,
        })
    }
}

/// One parameter of an operation and the tool argument that carries it.
#[derive(Debug, Clone)]
pub struct Param {
    /// The argument's name in the tool's input schema.
    pub property: String,
    /// The parameter's name on the wire.
    pub name: String,
    pub location: ParamIn,
    pub style: Style,
    pub explode: bool,
    pub required: bool,
}

/// How a request body is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyMedia {
    /// JSON, with this content type.
    Json(String),
    /// `application/x-www-form-urlencoded`.
    Form,
    /// `multipart/form-data`: one part per property (the body object's), each sent as planned.
    Multipart(Vec<PartPlan>),
    /// Any other single media type (`application/octet-stream`, `image/png`, `*/*`, …): the
    /// body is one file argument ([`FILE_SCHEMA`]), its bytes sent as they are with this media
    /// type (a range such as `image/*` takes the caller's `mediaType` within it).
    Raw(String),
}

/// How one property of a `multipart/form-data` body is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartPlan {
    /// The property (and part) name.
    pub name: String,
    pub kind: PartKind,
    /// The `encoding` object's `contentType` for this property, when it names one media type.
    pub content_type: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartKind {
    /// A text part: a string as it is, a number or boolean as its JSON text, an object as JSON
    /// (`application/json`); an array as one part per item.
    Text,
    /// A file argument (or an array of them): its bytes, decoded from base64, as a file part.
    File,
    /// A file argument whose schema says the part itself is base64 text (OpenAPI 3.1
    /// `contentEncoding: base64`): the argument's `data` is checked and sent as it is.
    Base64File,
}

/// A file argument's schema: the bytes as base64 text, with the media type and file name.
/// Base64 content, not a URI the gateway would read: a URI would have the gateway fetch
/// (or open) whatever a model names with the gateway's own network position and files — a
/// server-side request forgery and confused-deputy risk — so the bytes come with the call.
pub const FILE_SCHEMA: &str = r#"{"type":"object","properties":{"data":{"type":"string","contentEncoding":"base64","description":"The file's bytes, base64 (RFC 4648 standard alphabet)."},"mediaType":{"type":"string","description":"The file's media type (e.g. image/png)."},"filename":{"type":"string","description":"The file's name, as the service will see it."}},"required":["data"],"additionalProperties":false}"#;

/// Where the body's value comes from in the arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyShape {
    /// The body object's properties are top-level arguments (these names).
    Spread(Vec<String>),
    /// The whole body is one argument (this name).
    Whole(String),
}

#[derive(Debug, Clone)]
pub struct Body {
    pub media: BodyMedia,
    pub shape: BodyShape,
    pub required: bool,
}

/// What a call of one tool needs to build its request.
#[derive(Debug, Clone)]
pub struct Operation {
    pub tool: String,
    pub method: Method,
    /// The path template (`/products/{id}`).
    pub path: String,
    pub operation_id: Option<String>,
    pub params: Vec<Param>,
    pub body: Option<Body>,
    /// Security requirement alternatives (scheme names), in the document's order; empty: none.
    pub security: Vec<Vec<String>>,
    /// Whether a JSON success body is wrapped as `{"result": …}` in `structuredContent` (its
    /// schema is not an object).
    pub wrap_result: bool,
}
