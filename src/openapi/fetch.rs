//! A document given by URL, fetched and mapped once for `check-config` (the running gateway's
//! transport fetches it on every refresh, [`crate::upstream::openapi`]): so `check-config`
//! refuses a URL document the gateway would refuse, with the same reason, and lists the
//! operations it would skip. Redirects are not followed; the body is read within
//! `max_spec_bytes`.

use std::time::Duration;

use anyhow::{Context, bail};

use super::{Limits, Location, Mapped, Selection, map_text};

pub async fn fetch_and_map(
    url: &str,
    selection: &Selection,
    limits: Limits,
    max_definition_bytes: usize,
    timeout: Duration,
) -> anyhow::Result<Mapped> {
    let shown = crate::redact::url(url);
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .build()
        .context("HTTP client")?;
    let mut response = client.get(url).send().await.with_context(|| format!("fetching {shown}"))?;
    let status = response.status();
    if !status.is_success() {
        bail!("{shown}: HTTP {status}");
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.with_context(|| format!("reading {shown}"))? {
        if body.len() + chunk.len() > limits.max_spec_bytes {
            bail!("{shown}: the document exceeds max_spec_bytes ({})", limits.max_spec_bytes);
        }
        body.extend_from_slice(&chunk);
    }
    let text = String::from_utf8(body).with_context(|| format!("{shown} is not UTF-8"))?;
    let (selection, url) = (selection.clone(), url.to_string());
    let mapped = tokio::task::spawn_blocking(move || {
        map_text(text, Location::Url(url), &selection, limits, max_definition_bytes)
    })
    .await
    .context("mapping the document")??;
    Ok(mapped)
}
