//! OpenAPI targets: a REST service as an upstream ([`crate::openapi`] maps its document).
//!
//! The transport answers the MCP requests the gateway sends a server itself: `tools/list` is
//! the document's mapped tools (a document given by URL is fetched again on every list, a
//! file read again when it changed, so the refresh schedule re-reads it and changed
//! operations go through definition hashing and pinning like any tool), `ping` is answered
//! here, and `tools/call` becomes one HTTP request built as the document says
//! ([`crate::openapi::request`]) whose answer is mapped to a result or an upstream error
//! ([`reply`]). Anything else is "method not found" (no resources, prompts).
//!
//! Credentials: `[servers.NAME.auth]` (OAuth client credentials, token exchange, SigV4,
//! pass-through) on every request, as for an HTTP server; and the document's security
//! schemes satisfied from `[servers.NAME.security.SCHEME]` (API key in a header, the query or
//! a cookie; HTTP bearer; HTTP basic), read once at start and never logged. An operation that
//! requires schemes none of which is configured is not sent (`upstream_auth`).
//!
//! Redirects are not followed (the client follows none); the answer is read within
//! `max_response_bytes`.
//!
//! The target: `base_url`, else the document's first `servers` URL, whose *origin* is pinned
//! at the first mapping ([`OriginPin`]): a document that later names another origin keeps
//! being served against the approved one, its new origin pending until an operator approves
//! it (`POST /admin/registry/approve {"origin": SERVER}`), so a changed document cannot move
//! the configured credentials elsewhere. With definition pinning on, the approved origin is
//! kept in the pin store (and its file), so a restart does not trust a moved document anew. The static `headers` go on the document's own fetch
//! only when the document's host has the target's origin.

use std::{
    collections::BTreeMap,
    sync::{Arc, RwLock},
    task::{Context, Poll},
    time::{Duration, SystemTime},
};

use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri, header};
use serde_json::{Map, Value, json, value::RawValue};
use tower::Service;

mod origin;
pub mod reply;
mod schemes;

pub use origin::{OriginPin, origin_of};
use reply::Answer;
use schemes::{SchemeValue, is_token_scheme, scheme_value};

use super::{
    CredentialFailure, RawResult, UpstreamError, UpstreamFuture, UpstreamReply, UpstreamRequest,
    credentials::{Applied, Credentials},
    http::{body::read_body, client::HttpClient, errors::request_error},
};
use crate::{
    error::ErrorObject,
    openapi::{self, Limits, Location, Mapped, Operation, Selection},
    registry::pins::PinStore,
    shared_json::SharedJson,
};

/// Settings of one OpenAPI server.
pub struct OpenApiSettings {
    pub server: Arc<str>,
    /// The document's file path or URL.
    pub spec: String,
    /// The document as mapped when the configuration loaded (file documents).
    pub loaded: Option<Arc<Mapped>>,
    /// `base_url`; else the document's first server.
    pub base_url: Option<String>,
    pub selection: Selection,
    pub limits: Limits,
    pub max_definition_bytes: usize,
    pub connect_timeout: Duration,
    /// Static `headers`.
    pub headers: HeaderMap,
    pub max_response_bytes: usize,
    /// Most bytes of one request body as sent (files decoded).
    pub max_request_bytes: usize,
    pub credentials: Option<Credentials>,
    /// Secrets of the document's security schemes, by scheme name: (user name, secret).
    pub secrets: BTreeMap<String, (Option<String>, String)>,
}

#[derive(Clone)]
pub struct OpenApiTransport {
    inner: Arc<Inner>,
}

struct Inner {
    settings: OpenApiSettings,
    client: HttpClient,
    current: RwLock<Option<Arc<Mapped>>>,
    /// The file's length and modification time when it was last read.
    stamp: std::sync::Mutex<Option<(u64, Option<SystemTime>)>>,
    /// A hash of the URL document's text last mapped: the same text is not mapped again.
    fetched: std::sync::Mutex<Option<u64>>,
    /// The target origin approved for calls (without `base_url`).
    origin: std::sync::Mutex<OriginPin>,
    /// The document last refused and why (cleared when one maps): the admin report shows the
    /// reason, and the same fetched text is refused again without parsing it, so
    /// a hostile document costs its parse budget once, not at every refresh. Set by the
    /// parsing task itself, so a refresh that gave up waiting still learns it.
    refused: Arc<std::sync::Mutex<Option<Refusal>>>,
    /// Where approved target origins are kept across restarts (definition pinning on).
    pins: std::sync::OnceLock<Arc<PinStore>>,
}

/// A refused document: what identifies it (a hash of a URL document's text; `None` for a
/// file, which is read again) and why.
struct Refusal {
    key: Option<u64>,
    reason: String,
}

fn hash_of(value: impl std::hash::Hash) -> u64 {
    use std::hash::Hasher;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

impl OpenApiTransport {
    /// The tools as mapped (the document re-read first when it may have changed): the very
    /// texts the catalogue holds, shared, never written out and parsed again.
    pub async fn tools(&self) -> Result<Vec<SharedJson>, UpstreamError> {
        Ok(self.inner.reload().await?.list.clone())
    }

    pub fn new(settings: OpenApiSettings) -> Result<Self, String> {
        let tls = super::tls::client_config()?;
        let client = HttpClient::new(settings.connect_timeout, &tls);
        let stamp = match (&settings.loaded, openapi::is_url(&settings.spec)) {
            (Some(_), false) => file_stamp(&settings.spec),
            _ => None,
        };
        if let Some(mapped) = &settings.loaded {
            report(&settings.server, mapped, None);
        }
        let current = RwLock::new(settings.loaded.clone());
        let mut origin = OriginPin::default();
        if settings.base_url.is_none()
            && let Some(url) = settings.loaded.as_ref().and_then(|m| m.server_url.as_deref())
        {
            origin.offer(&settings.server, url, None);
        }
        let inner = Inner {
            settings,
            client,
            current,
            stamp: std::sync::Mutex::new(stamp),
            fetched: std::sync::Mutex::new(None),
            origin: std::sync::Mutex::new(origin),
            refused: Arc::new(std::sync::Mutex::new(None)),
            pins: std::sync::OnceLock::new(),
        };
        Ok(Self { inner: Arc::new(inner) })
    }

    /// Keeps the approved target origin in `pins` (and its pin file), and takes the one
    /// approved there before a restart as the approved one.
    pub fn attach_pins(&self, pins: Arc<PinStore>) {
        if self.inner.settings.base_url.is_some() || self.inner.pins.set(pins.clone()).is_err() {
            return;
        }
        self.origin_pin().reconcile(&self.inner.settings.server, &pins);
    }

    /// Why the document was last refused, while no later one mapped.
    pub fn refused(&self) -> Option<String> {
        self.inner.refused.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(|r| r.reason.clone())
    }

    fn origin_pin(&self) -> std::sync::MutexGuard<'_, OriginPin> {
        self.inner.origin.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The target origin a changed document offers, waiting for approval (for the admin API,
    /// the console and drift): `{"server", "kind": "origin", "approved_origin",
    /// "pending_origin", "since_epoch_secs"}`.
    pub fn pending_origin(&self) -> Option<Value> {
        let pin = self.origin_pin();
        let (offered, since) = pin.pending.as_ref()?;
        Some(json!({
            "server": &*self.inner.settings.server,
            "kind": "origin",
            "origin": offered.origin,
            "approved_origin": pin.approved.as_ref().map(|a| a.origin.as_str()),
            "pending_origin": offered.origin,
            "approved_description": pin.approved.as_ref().map(|a| format!("calls go to {}", a.origin)),
            "pending_description": format!("calls go to {}", offered.origin),
            "since_epoch_secs": since,
            "serving": "approved",
        }))
    }

    /// The origin calls are made to (`base_url`'s, else the approved one).
    pub fn target_origin(&self) -> Option<String> {
        match &self.inner.settings.base_url {
            Some(base) => origin_of(base),
            None => self.origin_pin().approved.as_ref().map(|a| a.origin.clone()),
        }
    }

    /// Approves the pending target origin; its new origin, or `None` when nothing is pending.
    pub fn approve_origin(&self) -> Option<String> {
        let mut pin = self.origin_pin();
        let (offered, _) = pin.pending.take()?;
        if let Some(pins) = self.inner.pins.get() {
            pins.pin_origin(&self.inner.settings.server, &offered.origin);
        }
        tracing::warn!(server = %self.inner.settings.server, origin = %offered.origin, "OpenAPI target origin change approved");
        let origin = offered.origin.clone();
        pin.approved = Some(offered);
        Some(origin)
    }

    /// The document as last mapped (`None` before a URL document was first fetched).
    pub fn mapped(&self) -> Option<Arc<Mapped>> {
        self.inner.current.read().ok().and_then(|c| c.clone())
    }
}

impl Service<UpstreamRequest> for OpenApiTransport {
    type Response = UpstreamReply;
    type Error = UpstreamError;
    type Future = UpstreamFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: UpstreamRequest) -> Self::Future {
        let inner = self.inner.clone();
        Box::pin(async move {
            match request.method {
                "tools/list" => inner.list().await,
                "tools/call" => inner.call(&request).await,
                "ping" => answer(&json!({})),
                other => {
                    Ok(refusal(-32601, format!("{other} is not served by an OpenAPI target (tools only)")))
                }
            }
        })
    }
}

fn answer(value: &Value) -> Result<UpstreamReply, UpstreamError> {
    RawValue::from_string(value.to_string())
        .map(|raw| UpstreamReply::Result(RawResult::new(raw)))
        .map_err(|e| UpstreamError::Protocol(e.to_string()))
}

fn refusal(code: i64, message: String) -> UpstreamReply {
    UpstreamReply::Error(ErrorObject { code, message, data: None })
}

fn file_stamp(path: &str) -> Option<(u64, Option<SystemTime>)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.len(), meta.modified().ok()))
}

/// Logs what a (new) document maps to, and every skipped operation with its reason.
fn report(server: &str, mapped: &Mapped, previous: Option<&Mapped>) {
    if previous
        .is_some_and(|p| p.skipped == mapped.skipped && p.trimmed == mapped.trimmed && p.list == mapped.list)
    {
        return;
    }
    tracing::info!(server, source = %mapped.source, operations = mapped.total_operations, tools = mapped.list.len(), skipped = mapped.skipped.len(), trimmed = mapped.trimmed.len(), components = mapped.components, "OpenAPI document mapped");
    for skipped in &mapped.skipped {
        tracing::warn!(server, method = %skipped.method, path = %skipped.path, operation = skipped.operation_id.as_deref().unwrap_or(""), reason = %skipped.reason, "OpenAPI operation skipped");
    }
    for selector in &mapped.unmatched_selectors {
        tracing::warn!(server, selector = %selector, "OpenAPI selector matches no operation of the document");
    }
    for trimmed in &mapped.trimmed {
        tracing::warn!(server, tool = %trimmed.tool, method = %trimmed.method, path = %trimmed.path, reason = %trimmed.reason, "OpenAPI tool served with a schema trimmed");
    }
}

impl Inner {
    /// The tools, the document re-read first when it may have changed.
    async fn list(&self) -> Result<UpstreamReply, UpstreamError> {
        let mapped = self.reload().await?;
        RawValue::from_string(mapped.list_result())
            .map(|raw| UpstreamReply::Result(RawResult::new(raw)))
            .map_err(|e| UpstreamError::Protocol(e.to_string()))
    }

    async fn reload(&self) -> Result<Arc<Mapped>, UpstreamError> {
        let settings = &self.settings;
        let previous = self.current.read().ok().and_then(|c| c.clone());
        let mut fetched_hash = None;
        let (key, text_and_location) = if openapi::is_url(&settings.spec) {
            let text = self.fetch().await?;
            let hash = hash_of(&text);
            let same = self.fetched.lock().is_ok_and(|last| *last == Some(hash));
            if same && let Some(previous) = &previous {
                return Ok(previous.clone());
            }
            fetched_hash = Some(hash);
            (Some(hash), Some((text, Location::Url(settings.spec.clone()))))
        } else {
            let stamp = file_stamp(&settings.spec);
            let unchanged = self.stamp.lock().is_ok_and(|s| s.is_some() && *s == stamp);
            if unchanged && let Some(previous) = &previous {
                return Ok(previous.clone());
            }
            // A file is read again at every refresh until one maps: the files its refs
            // name may have changed.
            (None, None)
        };
        if let Some(refusal) = self.refused.lock().unwrap_or_else(|p| p.into_inner()).as_ref()
            && key.is_some()
            && refusal.key == key
        {
            return Err(UpstreamError::Protocol(refusal.reason.clone()));
        }
        let (selection, limits, max_definition) =
            (settings.selection.clone(), settings.limits, settings.max_definition_bytes);
        let (spec, refused) = (settings.spec.clone(), self.refused.clone());
        let mapped = tokio::task::spawn_blocking(move || {
            let mapped = match text_and_location {
                Some((text, location)) => {
                    openapi::map_text(text, location, &selection, limits, max_definition)
                }
                None => openapi::load_file(std::path::Path::new(&spec), &selection, limits, max_definition),
            };
            // The parsed document is dropped: its memory goes back to the system now.
            crate::allocator::release_freed();
            let mut refused = refused.lock().unwrap_or_else(|p| p.into_inner());
            match mapped {
                Ok(mapped) => {
                    *refused = None;
                    Ok(mapped)
                }
                Err(e) => {
                    let reason = format!("OpenAPI document refused: {e}");
                    *refused = Some(Refusal { key, reason: reason.clone() });
                    Err(reason)
                }
            }
        })
        .await
        .map_err(|e| UpstreamError::Protocol(format!("OpenAPI document not mapped: {e}")))?
        .map_err(UpstreamError::Protocol)?;
        if settings.base_url.is_none() && mapped.server_url.is_none() {
            return Err(UpstreamError::Protocol(format!(
                "OpenAPI document {}: no absolute `servers` URL; set servers.{}.base_url",
                mapped.source, settings.server
            )));
        }
        let mapped = Arc::new(mapped);
        report(&settings.server, &mapped, previous.as_deref());
        if settings.base_url.is_none()
            && let Some(url) = &mapped.server_url
        {
            let pins = self.pins.get().map(|p| &**p);
            self.origin.lock().unwrap_or_else(|p| p.into_inner()).offer(&settings.server, url, pins);
        }
        if !openapi::is_url(&settings.spec)
            && let Ok(mut stamp) = self.stamp.lock()
        {
            *stamp = file_stamp(&settings.spec);
        }
        if let Some(hash) = fetched_hash
            && let Ok(mut last) = self.fetched.lock()
        {
            *last = Some(hash);
        }
        if let Ok(mut current) = self.current.write() {
            *current = Some(mapped.clone());
        }
        Ok(mapped)
    }

    /// The document at `spec`'s URL, within `max_spec_bytes`.
    async fn fetch(&self) -> Result<String, UpstreamError> {
        let uri: Uri = self
            .settings
            .spec
            .parse()
            .map_err(|e| UpstreamError::Protocol(format!("spec URL not valid: {e}")))?;
        // The static headers are the target's: sent to the document's host only when it is
        // the target's origin (`base_url`'s, else the approved one; none before the first).
        let target = match &self.settings.base_url {
            Some(base) => origin_of(base),
            None => self
                .origin
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .approved
                .as_ref()
                .map(|a| a.origin.clone()),
        };
        let same_origin = target.is_some() && target == origin_of(&self.settings.spec);
        let headers = if same_origin { self.settings.headers.clone() } else { HeaderMap::new() };
        let response = self.client.request(Method::GET, uri).headers(headers).send().await;
        let response = response.map_err(request_error)?;
        let status = response.status().as_u16();
        if matches!(status, 401 | 403) && !same_origin && !self.settings.headers.is_empty() {
            return Err(UpstreamError::Protocol(format!(
                "the OpenAPI document's host answered HTTP {status}; the static headers are sent to it only when it is the target's origin: set servers.{}.base_url to a URL of the document's origin to send them",
                self.settings.server
            )));
        }
        if !(200..300).contains(&status) {
            return Err(UpstreamError::Status { status });
        }
        let body = read_body(response, self.settings.limits.max_spec_bytes).await.map_err(|e| match e {
            UpstreamError::ResponseTooLarge { limit } => {
                UpstreamError::Protocol(format!("the OpenAPI document exceeds max_spec_bytes ({limit})"))
            }
            other => other,
        })?;
        String::from_utf8(body.to_vec())
            .map_err(|e| UpstreamError::Protocol(format!("the OpenAPI document is not UTF-8: {e}")))
    }

    async fn call(&self, request: &UpstreamRequest) -> Result<UpstreamReply, UpstreamError> {
        let mapped = match self.current.read().ok().and_then(|c| c.clone()) {
            Some(mapped) => mapped,
            None => self.reload().await?,
        };
        let tool = request.params.get("name").and_then(Value::as_str).unwrap_or("");
        let Some(operation) = mapped.operations.get(tool).cloned() else {
            return Ok(refusal(-32602, format!("unknown tool {tool:?}")));
        };
        let empty = Map::new();
        let arguments = request.params.get("arguments").and_then(Value::as_object).unwrap_or(&empty);
        let built = match openapi::request::build(&operation, arguments, self.settings.max_request_bytes) {
            Ok(built) => built,
            Err(invalid) => return Err(UpstreamError::BadArguments(invalid)),
        };
        let approved;
        let base = match &self.settings.base_url {
            Some(base) => base.as_str(),
            None => {
                approved = self
                    .origin
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .approved
                    .as_ref()
                    .map(|a| a.url.clone());
                match &approved {
                    Some(url) => url.as_str(),
                    None => {
                        return Err(UpstreamError::Protocol(format!(
                            "OpenAPI document {}: no approved target; set servers.{}.base_url",
                            mapped.source, self.settings.server
                        )));
                    }
                }
            }
        };
        let schemes = self.schemes_for(&operation, &mapped)?;
        let mut path_and_query = built.path_and_query;
        let mut cookies = built.cookies;
        let mut headers = self.settings.headers.clone();
        for (name, value) in &built.headers {
            let name = HeaderName::try_from(name.as_str()).map_err(|_| {
                UpstreamError::Protocol(format!("header parameter {name:?} is not a header name"))
            })?;
            match HeaderValue::try_from(value.as_str()) {
                Ok(value) => {
                    headers.append(name, value);
                }
                Err(_) => {
                    return Ok(refusal(
                        -32602,
                        format!("argument for header {name} is not a valid header value"),
                    ));
                }
            }
        }
        for applied in schemes {
            match applied {
                SchemeValue::Header(name, value) => {
                    headers.insert(name, value);
                }
                SchemeValue::Query(name, value) => {
                    path_and_query.push(if path_and_query.contains('?') { '&' } else { '?' });
                    path_and_query.push_str(&format!(
                        "{}={}",
                        openapi::request::encode(&name),
                        openapi::request::encode(&value)
                    ));
                }
                SchemeValue::Cookie(name, value) => cookies.push((name, value)),
            }
        }
        if !cookies.is_empty() {
            let text = cookies.iter().map(|(n, v)| format!("{n}={v}")).collect::<Vec<_>>().join("; ");
            let mut value = HeaderValue::try_from(text)
                .map_err(|_| UpstreamError::Protocol("cookie not encodable".into()))?;
            value.set_sensitive(true);
            headers.insert(header::COOKIE, value);
        }
        for (name, value) in request.outbound.headers() {
            if let Ok(value) = HeaderValue::try_from(value) {
                headers.insert(name, value);
            }
        }
        let url = format!("{}{}", base.trim_end_matches('/'), path_and_query);
        let uri: Uri =
            url.parse().map_err(|e| UpstreamError::Protocol(format!("request URL not valid: {e}")))?;
        let body = built.body.map(|(content_type, bytes)| {
            if let Ok(value) = HeaderValue::try_from(content_type) {
                headers.insert(header::CONTENT_TYPE, value);
            }
            bytes
        });
        let applied = match &self.settings.credentials {
            Some(credentials) => Some(credentials.for_call(request.caller.as_deref()).await?),
            None => None,
        };
        let first = self.send(&operation, &uri, &headers, body.clone(), applied.as_ref()).await;
        // An OAuth token refused with 401: renewed once, the call made once more.
        if let (Err(UpstreamError::Unauthorized { status: 401 }), Some(credentials), Some(used)) =
            (&first, &self.settings.credentials, &applied)
            && credentials.renews_on_401()
        {
            credentials.refused(request.caller.as_deref(), used);
            let renewed = credentials.for_call(request.caller.as_deref()).await?;
            return self.send(&operation, &uri, &headers, body, Some(&renewed)).await;
        }
        first
    }

    async fn send(
        &self,
        operation: &Operation,
        uri: &Uri,
        headers: &HeaderMap,
        body: Option<Vec<u8>>,
        applied: Option<&Applied>,
    ) -> Result<UpstreamReply, UpstreamError> {
        let mut builder = self.client.request(operation.method.clone(), uri.clone()).headers(headers.clone());
        if let Some(body) = body {
            builder = builder.body(body);
        }
        match applied {
            Some(Applied::Bearer(value)) => {
                builder = builder.typed_header(header::AUTHORIZATION, value.clone())
            }
            Some(Applied::Signed(signer)) => builder = builder.signed_by(signer.clone()),
            None => {}
        }
        // The Host header is what SigV4 signs: set it as it will be sent.
        if let Some(authority) = uri.authority()
            && let Ok(host) = HeaderValue::try_from(authority.as_str())
        {
            builder = builder.typed_header(header::HOST, host);
        }
        let response = builder.send().await.map_err(request_error)?;
        let status = response.status().as_u16();
        let text = |name: header::HeaderName| {
            response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string)
        };
        let (content_type, retry_after) = (text(header::CONTENT_TYPE), text(header::RETRY_AFTER));
        let body = read_body(response, self.settings.max_response_bytes).await?;
        reply::map(
            &Answer {
                status,
                content_type: content_type.as_deref(),
                retry_after: retry_after.as_deref(),
                body: &body,
            },
            operation.wrap_result,
        )
    }

    /// The credentials of the first security alternative of `operation` that configuration
    /// satisfies. None satisfied (and the operation requires one): nothing is sent, unless
    /// `auth` is configured (it may be what the service checks, e.g. SigV4).
    fn schemes_for(&self, operation: &Operation, mapped: &Mapped) -> Result<Vec<SchemeValue>, UpstreamError> {
        if operation.security.is_empty() {
            return Ok(Vec::new());
        }
        let auth = self.settings.credentials.is_some();
        for alternative in &operation.security {
            let satisfied = alternative.iter().all(|name| {
                self.settings.secrets.contains_key(name)
                    || (auth && mapped.schemes.get(name).is_some_and(is_token_scheme))
            });
            if !satisfied {
                continue;
            }
            let mut values = Vec::new();
            for name in alternative {
                if let (Some(secret), Some(scheme)) =
                    (self.settings.secrets.get(name), mapped.schemes.get(name))
                {
                    values.push(scheme_value(name, scheme, secret)?);
                }
            }
            return Ok(values);
        }
        if auth {
            return Ok(Vec::new());
        }
        let wanted: Vec<String> = operation.security.iter().map(|alt| alt.join(" + ")).collect();
        Err(UpstreamError::Credentials {
            failure: CredentialFailure::NotConfigured,
            detail: format!(
                "operation {} needs security scheme {}; none is configured (servers.{}.security)",
                operation.tool,
                wanted.join(" or "),
                self.settings.server
            ),
        })
    }
}
