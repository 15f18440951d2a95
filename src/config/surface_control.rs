//! Catalogue control of what servers offer besides tools: `[prompts.NAME]` (`rename`,
//! `description`, `hide`) and `[resources]` (`hide`: URIs or URI prefixes left out of every
//! list and refused when read; `descriptions`: a description replacing the server's, by exact
//! URI or template text). Checked at load (a `hide` prefix must be in the canonical form URIs
//! are compared in, `crate::resource_uri`); applied by the federation's index
//! (`gateway/federation/index/`) each time it is built.

use std::collections::BTreeMap;

use anyhow::bail;
use serde::{Deserialize, Serialize};

use super::lenient;
use crate::resource_uri::{CanonicalUri, check_prefix};

/// Longest name a prompt may be renamed to.
pub const MAX_PROMPT_NAME_CHARS: usize = 128;

/// `[prompts.NAME]`: NAME is the name callers would see without it (the server's own, or
/// `server__name` when two servers offer it).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PromptControl {
    /// The name callers see instead (the server still gets its own).
    #[serde(deserialize_with = "lenient::opt_string")]
    pub rename: Option<String>,
    /// A description replacing the server's.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub description: Option<String>,
    /// Left out of `prompts/list` and refused by `prompts/get` and completion as unknown.
    pub hide: bool,
}

/// `[resources]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ResourceControl {
    /// URIs or URI prefixes (a resource's URI, or a template's text, that starts with one):
    /// left out of `resources/list` and `resources/templates/list`, and a read of such a URI
    /// is `resource_not_found` (as for a URI no server serves).
    #[serde(deserialize_with = "lenient::strings")]
    pub hide: Vec<String>,
    /// Descriptions replacing the server's, by exact URI or template text.
    pub descriptions: BTreeMap<String, String>,
}

impl ResourceControl {
    /// Whether the resource `uri` is hidden.
    pub fn hides(&self, uri: &CanonicalUri) -> bool {
        self.hide.iter().any(|prefix| uri.is_under(prefix))
    }

    /// Whether the template `text` is hidden.
    pub fn hides_template(&self, text: &str) -> bool {
        self.hide.iter().any(|prefix| text.starts_with(prefix.as_str()))
    }
}

/// Checks `[prompts.*]` and `[resources]`: renames present, short and distinct; no empty prefix
/// (it would hide everything), every prefix canonical.
pub fn validate(
    prompts: &BTreeMap<String, PromptControl>,
    resources: &ResourceControl,
) -> anyhow::Result<()> {
    let mut shown: BTreeMap<&str, &str> = BTreeMap::new();
    for (name, control) in prompts {
        if let Some(rename) = &control.rename {
            if rename.is_empty() || rename.chars().count() > MAX_PROMPT_NAME_CHARS {
                bail!("prompts.{name}: rename must be 1 to {MAX_PROMPT_NAME_CHARS} characters");
            }
            if control.hide {
                bail!("prompts.{name}: a hidden prompt cannot be renamed");
            }
            if let Some(other) = shown.insert(rename, name) {
                bail!("prompts.{name}: rename {rename:?} is also prompts.{other}'s");
            }
        }
    }
    if resources.hide.iter().any(String::is_empty) {
        bail!("resources.hide: an empty prefix would hide every resource");
    }
    for prefix in &resources.hide {
        check_prefix(prefix).map_err(|e| anyhow::anyhow!("resources.hide: {e}"))?;
    }
    // A URI's description is found by its canonical form (a template's, by its text).
    for uri in resources.descriptions.keys().filter(|key| !key.contains('{')) {
        check_prefix(uri).map_err(|e| anyhow::anyhow!("resources.descriptions: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renames_must_be_distinct_and_prefixes_not_empty() {
        let rename = |to: &str| PromptControl { rename: Some(to.into()), ..PromptControl::default() };
        let prompts = BTreeMap::from([("a".to_string(), rename("x")), ("b".to_string(), rename("x"))]);
        assert!(
            validate(&prompts, &ResourceControl::default()).unwrap_err().to_string().contains("prompts.b")
        );
        let hidden = ResourceControl { hide: vec![String::new()], ..ResourceControl::default() };
        assert!(validate(&BTreeMap::new(), &hidden).is_err());
        let ok = ResourceControl { hide: vec!["manga://internal/".into()], ..ResourceControl::default() };
        let uri = |text: &str| CanonicalUri::parse(text).unwrap();
        assert!(ok.hides(&uri("manga://internal/stock")) && !ok.hides(&uri("manga://catalog/1")));
        assert!(!ok.hides(&uri("manga://catalog/../internal/stock")), "a host is no segment");
        let deep = ResourceControl { hide: vec!["file:///private/".into()], ..ResourceControl::default() };
        assert!(deep.hides(&uri("file:///public/../private/key")), "compared in canonical form");
        assert!(ok.hides_template("manga://internal/{id}"));
        let dotted =
            ResourceControl { hide: vec!["manga://x/a/../internal/".into()], ..ResourceControl::default() };
        let refused = validate(&BTreeMap::new(), &dotted).unwrap_err().to_string();
        assert!(refused.contains("write \"manga://x/internal/\""), "{refused}");
        let described = |key: &str| ResourceControl {
            descriptions: BTreeMap::from([(key.to_string(), "d".to_string())]),
            ..ResourceControl::default()
        };
        assert!(validate(&BTreeMap::new(), &described("manga://x/%7Eme")).is_err(), "not canonical");
        assert!(validate(&BTreeMap::new(), &described("manga://x/~me")).is_ok());
        assert!(validate(&BTreeMap::new(), &described("Manga://x/{id}")).is_ok(), "a template's text");
    }
}
