//! Load-time checks of catalogue control (`[tools.NAME]` `rename`, `description`, `hide`,
//! `annotations`, `fixed_arguments`, `default_arguments`) and of the tool search mode
//! (`[catalogue.search]`): everything that can be known before any server is listed, with the
//! section named. A tool discovered later whose schema does not take an override is withheld
//! and reported by the catalogue instead (`GET /admin/registry/collisions`).

use std::collections::BTreeMap;

use anyhow::bail;
use serde_json::Value;

use super::Config;
use crate::tool_control::META_TOOLS;

impl Config {
    /// Catalogue control and search settings that contradict themselves or the static tools.
    pub(super) fn validate_catalogue_control(&self) -> anyhow::Result<()> {
        let search = self.catalogue.search.enabled;
        // Names callers will see from configuration: a section's rename, else its own name
        // (unless hidden), and every static tool not renamed or hidden by a section.
        let mut claimed: BTreeMap<String, String> = BTreeMap::new();
        for (tool, settings) in &self.tools {
            let overrides = settings.overrides();
            if let Err(problem) = overrides.check() {
                bail!("tools.{tool}: {problem}");
            }
            for definition in self.static_definitions(tool, settings.server.as_deref()) {
                if let Err(problem) = overrides.apply(tool, definition) {
                    bail!("tools.{tool}: {problem}");
                }
            }
            if settings.hide {
                continue;
            }
            let shown = settings.rename.clone().unwrap_or_else(|| tool.clone());
            if search && META_TOOLS.contains(&shown.as_str()) && settings.rename.is_some() {
                bail!("tools.{tool}: rename {shown:?} is a meta-tool's name in search mode");
            }
            if let Some(other) = claimed.insert(shown.clone(), format!("tools.{tool}")) {
                bail!(
                    "tools.{tool}: rename {shown:?} collides with {other}, which callers also see as {shown:?}"
                );
            }
        }
        for (server, config) in &self.servers {
            for definition in &config.tools {
                let Some(name) = definition.get("name").and_then(Value::as_str) else { continue };
                if self.tools.contains_key(name) {
                    continue;
                }
                if let Some(renamed) = claimed.get(name).filter(|by| by.as_str() != format!("tools.{name}")) {
                    bail!(
                        "{renamed}: rename {name:?} collides with the tool {name:?} of server {server} (rename or hide that one too)"
                    );
                }
            }
        }
        for (tool, settings) in &self.tools {
            let Some(fallback) = settings.fallback_tool.as_deref() else { continue };
            if let Some(target) = self.tools.get(fallback) {
                if target.hide {
                    bail!(
                        "tools.{tool}: fallback_tool {fallback:?} is hidden (a hidden tool is not callable)"
                    );
                }
                if let Some(renamed) = &target.rename {
                    bail!(
                        "tools.{tool}: fallback_tool {fallback:?} is renamed to {renamed:?}; name it as callers see it"
                    );
                }
            }
        }
        for pinned in &self.catalogue.search.pinned {
            if let Some(target) = self.tools.get(pinned)
                && (target.hide || target.rename.as_deref().is_some_and(|r| r != pinned))
            {
                let why = if target.hide {
                    "hidden".to_string()
                } else {
                    format!("renamed to {:?}", target.rename)
                };
                bail!("catalogue.search.pinned: {pinned:?} is {why}; pin tools by the name callers see");
            }
        }
        Ok(())
    }

    /// The static definitions (`servers.NAME.tools`) a `[tools.NAME]` section applies to.
    fn static_definitions<'a>(
        &'a self,
        tool: &'a str,
        server: Option<&'a str>,
    ) -> impl Iterator<Item = &'a Value> {
        self.servers
            .iter()
            .filter(move |(name, _)| server.is_none_or(|s| s == name.as_str()))
            .flat_map(|(_, config)| config.tools.iter())
            .filter(move |definition| definition.get("name").and_then(Value::as_str) == Some(tool))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(toml: &str) -> anyhow::Result<Config> {
        let config: Config = toml::from_str(toml)?;
        config.validate()?;
        Ok(config)
    }

    const SERVER: &str = r#"
[servers.store]
transport = "http"
url = "http://127.0.0.1:1/mcp"
discover = false
tools = [
  {name = "add_to_cart", inputSchema = {type = "object", properties = {manga_id = {type = "string"}, store = {type = "string", enum = ["tokyo", "osaka"]}, quantity = {type = "integer", minimum = 1}}, required = ["manga_id"]}},
  {name = "checkout", inputSchema = {type = "object"}},
]
"#;

    fn refused(extra: &str) -> String {
        format!("{:#}", load(&format!("{SERVER}{extra}")).unwrap_err())
    }

    #[test]
    fn valid_control_loads() {
        load(&format!(
            "{SERVER}[tools.add_to_cart]\nrename = \"put_in_cart\"\nfixed_arguments = {{store = \"tokyo\"}}\ndefault_arguments = {{quantity = 1}}\nannotations = {{idempotentHint = true}}\n[tools.checkout]\nhide = true\n[catalogue.search]\nenabled = true\npinned = [\"put_in_cart\"]\n"
        ))
        .unwrap();
    }

    #[test]
    fn contradictions_are_refused_with_the_section_named() {
        assert!(
            refused("[tools.add_to_cart]\nrename = \"checkout\"\n")
                .contains("collides with the tool \"checkout\"")
        );
        assert!(
            refused("[tools.add_to_cart]\nrename = \"x\"\n[tools.checkout]\nrename = \"x\"\n")
                .contains("tools.checkout: rename \"x\" collides with tools.add_to_cart")
        );
        assert!(
            refused("[tools.add_to_cart]\nfixed_arguments = {shop = \"x\"}\n")
                .contains("tools.add_to_cart: fixed argument \"shop\" is not a property")
        );
        assert!(
            refused("[tools.add_to_cart]\nfixed_arguments = {store = \"kyoto\"}\n")
                .contains("fixed argument \"store\" fails the tool's inputSchema")
        );
        assert!(refused("[tools.add_to_cart]\nrename = \"a b\"\n").contains("must match"));
        assert!(
            refused("[tools.checkout]\nhide = true\n[tools.add_to_cart]\nfallback_tool = \"checkout\"\n")
                .contains("fallback_tool \"checkout\" is hidden")
        );
        assert!(
            refused("[tools.add_to_cart]\nrename = \"search_tools\"\n[catalogue.search]\nenabled = true\n")
                .contains("meta-tool")
        );
        assert!(
            refused(
                "[tools.checkout]\nhide = true\n[catalogue.search]\nenabled = true\npinned = [\"checkout\"]\n"
            )
            .contains("\"checkout\" is hidden")
        );
        assert!(refused("[catalogue.search]\nmax_results = 0\n").contains("between 1 and"));
        // Swapping two names is fine: neither keeps the name the other takes.
        load(&format!(
            "{SERVER}[tools.add_to_cart]\nrename = \"checkout\"\n[tools.checkout]\nrename = \"add_to_cart\"\n"
        ))
        .unwrap();
    }
}
