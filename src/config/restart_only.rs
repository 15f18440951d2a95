//! Which settings a running gateway takes from a reloaded file, and which wait for a restart.
//!
//! A reload (`SIGHUP`, `serve --watch`, `POST /admin/config/reload`) applies what the gateway
//! reads per call or per refresh — servers, `[defaults]`, `[tools.*]`, endpoints, hooks,
//! quotas, policy, catalogue control. The keys here were consumed once, at start: a bound
//! listener, the runtime, the log filter, the registry tiers' and Redis clients, the audit
//! sink, the tables sized at start. A reloaded file that changes one of them keeps the running
//! value (so what `GET /admin/config/reload` and the gateway report is what is in force) and
//! names the key, so the operator knows a restart is still owed.

use serde::Serialize;

use super::Config;

/// `new` with every restart-only key set back to its value in `running`, and the names of
/// those whose value differed (in the order they are checked).
pub fn keep_restart_only(running: &Config, mut new: Config) -> (Config, Vec<&'static str>) {
    let mut differing = Vec::new();
    macro_rules! keep {
        ($($key:ident).+, $name:literal) => {
            if !same(&running.$($key).+, &new.$($key).+) {
                differing.push($name);
                new.$($key).+ = running.$($key).+.clone();
            }
        };
    }
    keep!(listen, "listen");
    keep!(allow_non_loopback, "allow_non_loopback");
    keep!(metrics_listen, "metrics_listen");
    keep!(metrics, "metrics");
    keep!(log_level, "log_level");
    keep!(worker_threads, "worker_threads");
    keep!(shutdown_grace_secs, "shutdown_grace_secs");
    keep!(aws, "aws");
    keep!(redis_url, "redis_url");
    keep!(redis_ca_file, "redis_ca_file");
    keep!(redis_cluster, "redis_cluster");
    keep!(shared_breakers, "shared_breakers");
    keep!(dynamodb_table, "dynamodb_table");
    keep!(dynamodb_endpoint, "dynamodb_endpoint");
    keep!(cache, "cache");
    keep!(audit, "audit");
    keep!(inbound, "inbound");
    keep!(auth, "auth");
    keep!(admin, "admin");
    keep!(tasks, "tasks");
    keep!(approvals.state_dir, "approvals.state_dir");
    keep!(catalogue.pin_tool_definitions, "catalogue.pin_tool_definitions");
    keep!(catalogue.pin_file, "catalogue.pin_file");
    keep!(catalogue.max_tool_label_values, "catalogue.max_tool_label_values");
    // The registry's tiers are clients built at start; which URLs a registry entry may name
    // is checked per call, and is taken from the new file.
    let upstream_urls = new.registry.upstream_urls.clone();
    new.registry.upstream_urls = running.registry.upstream_urls.clone();
    keep!(registry, "registry");
    new.registry.upstream_urls = upstream_urls;
    (new, differing)
}

/// The top-level sections whose values differ between `a` and `b` (serialised, so a section
/// written differently but meaning the same is not a change).
pub fn changed_sections(a: &Config, b: &Config) -> Vec<String> {
    let (Ok(serde_json::Value::Object(a)), Ok(serde_json::Value::Object(b))) =
        (serde_json::to_value(a), serde_json::to_value(b))
    else {
        return Vec::new();
    };
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter().filter(|key| a.get(*key) != b.get(*key)).cloned().collect()
}

/// Whether two settings serialise alike.
pub fn same<T: Serialize>(a: &T, b: &T) -> bool {
    match (serde_json::to_value(a), serde_json::to_value(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_only_keys_keep_their_running_values_and_are_named() {
        let running = Config::default();
        let mut new = Config { log_level: "debug".into(), refresh_interval_secs: 7, ..Config::default() };
        new.inbound.max_batch_items = 3;
        new.registry.redis_prefix = "other:".into();
        new.registry.upstream_urls.allow = vec!["https://tools.example/*".into()];
        let (kept, differing) = keep_restart_only(&running, new);
        assert_eq!(differing, ["log_level", "inbound", "registry"]);
        assert_eq!(kept.log_level, running.log_level);
        assert_eq!(kept.inbound.max_batch_items, running.inbound.max_batch_items);
        assert_eq!(kept.registry.redis_prefix, running.registry.redis_prefix);
        assert_eq!(kept.refresh_interval_secs, 7, "a reloadable key is taken");
        assert_eq!(kept.registry.upstream_urls.allow, ["https://tools.example/*"], "checked per call: taken");
        assert_eq!(changed_sections(&running, &kept), ["refresh_interval_secs", "registry"]);
    }

    #[test]
    fn an_identical_file_changes_nothing() {
        let (kept, differing) = keep_restart_only(&Config::default(), Config::default());
        assert!(differing.is_empty());
        assert!(changed_sections(&Config::default(), &kept).is_empty());
    }
}
