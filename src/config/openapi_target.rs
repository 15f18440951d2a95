//! The keys of an OpenAPI server (`transport = "openapi"`): which operations it serves
//! (`include`/`exclude` selectors), the credentials of its document's security schemes, and
//! the bounds of the document. A file `spec` is read and mapped here, when the configuration
//! loads, so a broken document is refused at start (and by `check-config`) with its file, the
//! JSON pointer or line, and the reason, instead of surfacing as a missing tool later.

use std::{path::PathBuf, sync::Arc};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use super::{Config, ServerConfig, TransportKind};
use crate::openapi::{self, Limits, Selection};

/// Largest document read (bytes of the file or the HTTP body, and of every file it refers to).
pub const DEFAULT_MAX_SPEC_BYTES: usize = 32 * 1024 * 1024;
/// Most operations a document may hold (before selection).
pub const DEFAULT_MAX_OPERATIONS: usize = 20_000;
/// Deepest nesting of a schema once its `$ref`s are inlined.
pub const DEFAULT_MAX_SCHEMA_DEPTH: usize = 32;
/// The most `max_schema_depth` may be set to.
const MAX_SCHEMA_DEPTH_CAP: usize = 256;

/// Where one security scheme's secret comes from (`[servers.NAME.security.SCHEME]`): an API
/// key, a bearer token, or a basic password, from `env` or `file` (never from the
/// configuration itself, and never logged).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SchemeCredential {
    /// The environment variable holding the secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    /// The file holding the secret (surrounding whitespace ignored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
    /// `http` `basic` schemes: the user name (the secret is the password).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
}

impl SchemeCredential {
    /// The secret, read now. The error names the variable or file, never a value.
    pub fn secret(&self) -> anyhow::Result<String> {
        match (&self.env, &self.file) {
            (Some(var), None) => {
                let value =
                    std::env::var(var).with_context(|| format!("environment variable {var} is not set"))?;
                Ok(value.trim().to_string())
            }
            (None, Some(path)) => {
                let text =
                    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
                Ok(text.trim().to_string())
            }
            _ => bail!("set exactly one of `env` and `file`"),
        }
    }
}

impl ServerConfig {
    /// The bounds of this server's OpenAPI document.
    pub fn openapi_limits(&self, defaults: &super::ServerDefaults) -> Limits {
        Limits {
            max_list_bytes: self.tool_list_bounds(defaults).max_list_bytes,
            max_spec_bytes: self.max_spec_bytes.unwrap_or(DEFAULT_MAX_SPEC_BYTES),
            max_operations: self.max_operations.unwrap_or(DEFAULT_MAX_OPERATIONS),
            max_schema_depth: self.max_schema_depth.unwrap_or(DEFAULT_MAX_SCHEMA_DEPTH),
        }
    }

    /// The operations this server serves (`include`, `exclude`), parsed.
    pub fn openapi_selection(&self) -> anyhow::Result<Selection> {
        Selection::parse(&self.include, &self.exclude)
    }

    /// Whether `spec` names a document to fetch over HTTP (re-read on every refresh).
    pub fn spec_is_url(&self) -> bool {
        self.spec.as_deref().is_some_and(openapi::is_url)
    }
}

/// After deserialising: reads and maps the document of every OpenAPI server whose `spec` is a
/// file (one given by URL is fetched when the gateway starts and on every refresh).
pub(super) fn prepare(config: &mut Config) -> anyhow::Result<()> {
    for (name, server) in &mut config.servers {
        if server.transport != TransportKind::Openapi {
            continue;
        }
        let Some(spec) = server.spec.clone() else { continue };
        if openapi::is_url(&spec) {
            continue;
        }
        let selection = server.openapi_selection().with_context(|| format!("server {name}"))?;
        let limits = server.openapi_limits(&config.defaults);
        let max_definition = server.tool_list_bounds(&config.defaults).max_definition_bytes;
        let mapped = openapi::load_file(&PathBuf::from(&spec), &selection, limits, max_definition)
            .with_context(|| format!("server {name}: spec"))?;
        // The parsed document is dropped: its memory goes back to the system now.
        crate::allocator::release_freed();
        server.openapi_document = Some(Arc::new(mapped));
    }
    Ok(())
}

/// The checks of one server's OpenAPI keys (part of [`Config::validate`]).
pub(super) fn validate(
    name: &str,
    server: &ServerConfig,
    defaults: &super::ServerDefaults,
) -> anyhow::Result<()> {
    if server.transport != TransportKind::Openapi {
        return Ok(());
    }
    let Some(spec) = server.spec.as_deref().filter(|s| !s.trim().is_empty()) else {
        bail!("server {name}: transport \"openapi\" needs `spec` (the OpenAPI document's file or URL)");
    };
    if spec.contains("://") && !openapi::is_url(spec) {
        bail!("server {name}: spec {spec:?} must be a file path or an http:// or https:// URL");
    }
    if let Some(base) = &server.base_url
        && !openapi::is_url(base)
    {
        bail!("server {name}: base_url {base:?} must be an http:// or https:// URL");
    }
    server.openapi_selection().with_context(|| format!("server {name}"))?;
    let limits = server.openapi_limits(defaults);
    for (key, value) in [
        ("max_spec_bytes", limits.max_spec_bytes),
        ("max_operations", limits.max_operations),
        ("max_schema_depth", limits.max_schema_depth),
    ] {
        if value == 0 {
            bail!("servers.{name}.{key} must be at least 1");
        }
    }
    if server.max_request_bytes == Some(0) {
        bail!("servers.{name}.max_request_bytes must be at least 1");
    }
    // Inlining recurses once per level: a bound far above any real schema, well within a stack.
    if limits.max_schema_depth > MAX_SCHEMA_DEPTH_CAP {
        bail!("servers.{name}.max_schema_depth must be at most {MAX_SCHEMA_DEPTH_CAP}");
    }
    for (scheme, credential) in &server.security {
        if credential.env.is_some() == credential.file.is_some() {
            bail!("servers.{name}.security.{scheme}: set exactly one of `env` and `file`");
        }
    }
    if !server.discover {
        bail!(
            "server {name}: transport \"openapi\" learns its tools from its document; remove discover = false"
        );
    }
    Ok(())
}
