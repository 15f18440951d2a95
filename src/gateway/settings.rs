//! The configuration in force, as one value: the file's settings and everything the gateway
//! built from them that a reload may replace — the server stacks, the endpoints, the hooks,
//! the quotas and the policy.
//!
//! Why one value: a reload swaps it whole ([`super::reload`]), and a call takes it once, at the
//! door, and keeps it to the end ([`super::door::Admitted`]): a call in flight finishes on the
//! stack, timeouts, hooks and tool settings it started with, however many reloads happen
//! meanwhile, and never sees half of an old configuration and half of a new one.

use std::{collections::BTreeMap, sync::Arc};

use super::{Upstream, endpoints::Endpoints};
use crate::{
    config::{Config, ToolConfig},
    registry::ToolRecord,
};

/// One generation of the configuration and what was built from it.
pub struct Settings {
    /// The configuration as in force (keys that need a restart keep their running values).
    pub(super) config: Arc<Config>,
    /// Configured servers' stacks, by name.
    pub(super) upstreams: BTreeMap<String, Arc<Upstream>>,
    /// Endpoints per audience (`[endpoints.NAME]`).
    pub(super) endpoints: Endpoints,
    /// Guardrail hooks on calls (`[[hooks]]`; empty: calls pay nothing for them).
    pub(super) hooks: crate::guardrail::Hooks,
    /// Call quotas (`None` without `[[quotas.rules]]`: calls pay nothing for them).
    pub(super) quotas: Option<Arc<crate::quota::Quotas>>,
    /// Tool policy (`[policy]`); `None`: every caller may list and call every tool.
    pub(super) policy: Option<Arc<crate::policy::Policy>>,
    /// 1 at start, one more at each applied reload.
    pub(super) generation: u64,
    /// Settings of tools without a `[tools.NAME]` section.
    default_tool: ToolConfig,
}

/// What [`Settings::new`] is made of.
pub(super) struct Parts {
    pub config: Arc<Config>,
    pub upstreams: BTreeMap<String, Arc<Upstream>>,
    pub endpoints: Endpoints,
    pub hooks: crate::guardrail::Hooks,
    pub quotas: Option<Arc<crate::quota::Quotas>>,
    pub policy: Option<Arc<crate::policy::Policy>>,
    pub generation: u64,
}

impl Settings {
    pub(super) fn new(parts: Parts) -> Self {
        let Parts { config, upstreams, endpoints, hooks, quotas, policy, generation } = parts;
        Self {
            config,
            upstreams,
            endpoints,
            hooks,
            quotas,
            policy,
            generation,
            default_tool: ToolConfig::default(),
        }
    }

    /// Settings from the default configuration, for unit tests of the call path.
    #[cfg(test)]
    pub(super) fn for_tests() -> Arc<Self> {
        let hooks = crate::guardrail::Hooks::new(&[]).expect("no hooks compile");
        Arc::new(Self::new(Parts {
            config: Arc::new(Config::default()),
            upstreams: BTreeMap::new(),
            endpoints: Endpoints::default(),
            hooks,
            quotas: None,
            policy: None,
            generation: 1,
        }))
    }

    /// The configuration in force.
    pub fn config(&self) -> &Arc<Config> {
        &self.config
    }

    /// The endpoints per audience (`[endpoints.NAME]`).
    pub fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    /// The generation (1 at start, one more per applied reload).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The `[tools.NAME]` settings of a tool (defaults when it has none).
    pub fn tool_settings(&self, name: &str) -> &ToolConfig {
        self.config.tools.get(name).unwrap_or(&self.default_tool)
    }

    /// The `[tools.NAME]` settings of a catalogue tool: those of its name before a rename.
    pub fn settings_of(&self, tool: &ToolRecord) -> &ToolConfig {
        self.tool_settings(tool.settings_name())
    }

    /// Whether any hook is configured (a call without hooks pays one branch).
    pub(super) fn has_hooks(&self) -> bool {
        !self.hooks.is_empty()
    }

    /// Whether the results of `tool` pass an after-hook.
    pub(super) fn guards_results_of(&self, tool: &ToolRecord) -> bool {
        self.hooks.guards_results_of(&tool.name, &tool.server)
    }

    /// Whether `server`'s credentials are the caller's own (token exchange, pass-through).
    pub fn credentials_per_caller(&self, server: &str) -> bool {
        self.config
            .servers
            .get(server)
            .and_then(|s| s.auth.as_ref())
            .is_some_and(|auth| auth.kind.per_caller())
    }
}
