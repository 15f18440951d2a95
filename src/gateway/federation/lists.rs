//! Reading one server's lists besides tools: what it offers, then each list whole within the
//! server's bounds.
//!
//! What a server offers is what its handshake declared: a streamable-HTTP server's
//! `initialize` or `server/discover`, a persistent connection's `initialize`. A Lambda
//! function (direct invoke, JSON-RPC events) has no session and no handshake, so at each
//! refresh the gateway sends it one `initialize` through the invoke path (what every MCP
//! server answers, the awslabs adapters included) and reads its `capabilities`; a function
//! that does not answer it with capabilities has each list tried instead, `-32601` meaning
//! "not offered" (and completion assumed wherever prompts or templates are listed). An
//! AgentCore-style target (`lambda_event = "agentcore"`) carries tool calls only: it offers
//! nothing else. A server that declares the Skills extension (`capabilities.extensions`) has
//! its `skills/list` read too, within the same bounds.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json, value::RawValue};
use tower::ServiceExt;

use super::{
    ServerSurface,
    listed::{Listed, MimeTypes, NotKept},
};
use crate::{
    config::{ListBounds, TransportKind},
    gateway::{Upstream, tool_list::ListFailure},
    protocol::mcp::{self, Offers},
    registry::bounds::{ListKind, Tally},
    upstream::{UpstreamError, UpstreamReply, UpstreamRequest},
};

/// The three lists of a server's surface: method, the result's key, and the bound's kind.
pub(super) const LISTS: [(&str, &str, ListKind); 3] = [
    ("resources/list", "resources", ListKind::Resources),
    ("resources/templates/list", "resourceTemplates", ListKind::ResourceTemplates),
    ("prompts/list", "prompts", ListKind::Prompts),
];

/// What a server offers, and whether that was declared (`false`: every list is tried).
struct Learned {
    offers: Offers,
    declared: bool,
}

/// Reads `upstream`'s resources, resource templates and prompts — the lists it offers (see
/// the module documentation) — each list whole within `bounds`; a list the server does not
/// serve after all (`-32601`) is empty.
pub async fn list_surface(
    upstream: &Upstream,
    bounds: ListBounds,
) -> Result<ServerSurface, (ListKind, ListFailure)> {
    let learned = match (&upstream.http, &upstream.connection) {
        (Some(http), _) => Learned { offers: http.offers(), declared: true },
        (None, Some(connection)) => Learned { offers: connection.offers(), declared: true },
        (None, None) if upstream.transport == TransportKind::Lambda && !upstream.config.is_agentcore() => {
            lambda_offers(upstream).await.map_err(|failure| (ListKind::Resources, failure))?
        }
        (None, None) => Learned { offers: Offers::default(), declared: true },
    };
    let offers = learned.offers;
    let mut surface = ServerSurface {
        completions: offers.completions,
        // A function cannot send an update: subscriptions need a connection or a stream.
        subscribe: offers.subscribe && upstream.transport != TransportKind::Lambda,
        ..ServerSurface::default()
    };
    for (method, key, kind) in LISTS {
        let offered = match kind {
            ListKind::Prompts => offers.prompts,
            _ => offers.resources,
        };
        if !offered {
            continue;
        }
        // A list's MIME types are kept once each (see `listed`).
        let mut mimes = MimeTypes::default();
        let listed = match kind {
            ListKind::Resources => {
                // A resource is kept under its canonical URI; one with none is not served.
                let keep = |v| match Listed::resource(v, &mut mimes) {
                    Ok(kept) => Some(kept),
                    Err(NotKept::NoUri | NotKept::NotASkill(_)) => None,
                    Err(NotKept::Refused(uri, refusal)) => {
                        tracing::warn!(server = %upstream.name, uri = %crate::redact::url(&uri), reason = refusal.reason(), "resource not served: {refusal}");
                        None
                    }
                };
                list_all(upstream, method, key, bounds, keep)
                    .await
                    .map(|items| surface.resources = items.into())
            }
            ListKind::ResourceTemplates => {
                list_all(upstream, method, key, bounds, |v| Listed::template(&v, &mut mimes))
                    .await
                    .map(|items| surface.templates = items.into())
            }
            _ => list_all(upstream, method, key, bounds, Some).await.map(|items| surface.prompts = items),
        };
        listed.map_err(|failure| (kind, failure))?;
    }
    if offers.skills() {
        surface.offers_skills = true;
        // A skill entry is kept whole (its manifest's digests untouched), under the canonical
        // URI of its SKILL.md; one that is not a SEP-2640 entry is not served.
        let keep = |v| match Listed::skill(v) {
            Ok(kept) => Some(kept),
            Err(NotKept::NoUri) => None,
            Err(NotKept::Refused(uri, refusal)) => {
                tracing::warn!(server = %upstream.name, uri = %crate::redact::url(&uri), reason = refusal.reason(), "skill not served: {refusal}");
                None
            }
            Err(NotKept::NotASkill(uri)) => {
                tracing::warn!(server = %upstream.name, uri = %crate::redact::url(&uri), "skill not served: not a SEP-2640 skill entry (a SKILL.md URI, frontmatter.name, resources)");
                None
            }
        };
        let skills = list_all(upstream, "skills/list", "skills", bounds, keep).await;
        surface.skills = skills.map_err(|failure| (ListKind::Skills, failure))?.into();
    }
    if !learned.declared {
        // Nothing declared: completion is asked of a server with something to complete.
        surface.completions = !surface.prompts.is_empty() || !surface.templates.is_empty();
    }
    Ok(surface)
}

/// A Lambda function's offers: its answer to `initialize` sent through the invoke path, or,
/// when it answers that with an error or without capabilities, every list to be tried.
async fn lambda_offers(upstream: &Upstream) -> Result<Learned, ListFailure> {
    let mut params = Map::new();
    params.insert("protocolVersion".into(), json!(mcp::LATEST_LEGACY_VERSION));
    params.insert("capabilities".into(), json!({}));
    params.insert("clientInfo".into(), json!({"name": "mcp-gateway", "version": crate::VERSION}));
    let reply = upstream.service.clone().oneshot(UpstreamRequest::new("initialize", params)).await?;
    let declared = match reply {
        UpstreamReply::Result(raw) => serde_json::from_str::<Value>(raw.get())
            .ok()
            .filter(|result| result.get("capabilities").is_some_and(Value::is_object)),
        UpstreamReply::Error(_) => None,
    };
    Ok(match declared {
        Some(result) => Learned { offers: Offers::declared(&result), declared: true },
        None => {
            tracing::debug!(server = %upstream.name, "no capabilities in the function's initialize answer; every list is tried");
            Learned {
                offers: Offers { resources: true, prompts: true, ..Offers::default() },
                declared: false,
            }
        }
    })
}

/// Every page of one list (`method`, items under `key`), each definition counted on the way
/// and kept as `keep` makes it (objects only). A page is parsed item by item, so a list is
/// never held as one tree of values besides the kept items.
async fn list_all<T>(
    upstream: &Upstream,
    method: &'static str,
    key: &str,
    bounds: ListBounds,
    mut keep: impl FnMut(Value) -> Option<T>,
) -> Result<Vec<T>, ListFailure> {
    let mut items = Vec::new();
    let mut tally = Tally::new(bounds);
    let mut cursor: Option<String> = None;
    loop {
        tally.page().map_err(ListFailure::Refused)?;
        let mut params = Map::new();
        if let Some(c) = cursor.take() {
            params.insert("cursor".into(), json!(c));
        }
        let reply = upstream.service.clone().oneshot(UpstreamRequest::new(method, params)).await?;
        let raw = match reply {
            UpstreamReply::Result(raw) => raw,
            // Not offered: nothing to list.
            UpstreamReply::Error(e) if e.code == -32601 => return Ok(Vec::new()),
            UpstreamReply::Error(e) => {
                return Err(
                    UpstreamError::Protocol(format!("{method} failed: {} {}", e.code, e.message)).into()
                );
            }
        };
        let protocol = |detail: String| {
            ListFailure::Upstream(UpstreamError::Protocol(format!("{method} result: {detail}")))
        };
        let page: BTreeMap<String, &RawValue> =
            serde_json::from_str(raw.get()).map_err(|e| protocol(e.to_string()))?;
        let Some(listed) = page.get(key) else { return Ok(items) };
        let listed: Vec<&RawValue> =
            serde_json::from_str(listed.get()).map_err(|_| protocol(format!("{key} is not an array")))?;
        for item in listed {
            let item: Value = serde_json::from_str(item.get()).map_err(|e| protocol(e.to_string()))?;
            tally.item(crate::registry::bounds::json_len(&item)).map_err(ListFailure::Refused)?;
            // Only objects: what is listed is what callers receive.
            if item.is_object()
                && let Some(kept) = keep(item)
            {
                items.push(kept);
            }
        }
        let next = page.get("nextCursor").and_then(|next| serde_json::from_str::<String>(next.get()).ok());
        match next {
            Some(next) if !next.is_empty() => cursor = Some(next),
            _ => return Ok(items),
        }
    }
}
