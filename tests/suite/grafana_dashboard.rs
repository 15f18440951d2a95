//! The fleet dashboard (`deploy/grafana-dashboard.json`) cannot drift from the metric names:
//! a real Prometheus (the server from Debian's `prometheus` package, which
//! `scripts/validate-deploy.sh` installs under `.tools/bin` with promtool) scrapes a real
//! gateway after real traffic — calls, an unknown tool, a quota refusal, a fallback from a
//! server that refuses connections, a persistent (stdio) server, a tool policy — with the ECS
//! task label the deployment's collector adds. Every query of every panel must parse
//! (`promtool check rules` and Prometheus's own query API) and select series that exist, and
//! every variable must list values.

use std::{path::PathBuf, process::Command, time::Duration};

use crate::common::{
    Demo, Gateway, Proc, Scratch, TempFile, everything_entry, free_port, http_server, repo_root, wait_for,
    wait_port,
};
use serde_json::{Value, json};

/// The task label, as the collector's `resourcedetection` (ecs) adds it.
const TASK: &str = "arn:aws:ecs:eu-west-1:123456789012:task/manga-store/0123456789abcdef0123456789abcdef";

fn tool(name: &str) -> PathBuf {
    let path = repo_root().join(".tools/bin").join(name);
    assert!(
        path.exists(),
        "{} is missing: run `bash scripts/validate-deploy.sh` (scripts/test.sh does) to install it",
        path.display()
    );
    path
}

/// (where it is, the query): a panel's target or a variable.
type Queries = Vec<(String, String)>;

/// Every query of the dashboard: the panels' targets, and the variables'.
fn queries(dashboard: &Value) -> (Queries, Queries) {
    let mut panels = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap_or_else(|| panic!("a target without expr: {panel}"));
            panels.push((format!("{} / {}", panel["title"], target["refId"]), expr.to_string()));
        }
    }
    let mut variables = Vec::new();
    for variable in dashboard["templating"]["list"].as_array().unwrap() {
        if variable["type"] == "query" {
            let query = variable["query"]["query"].as_str().unwrap().to_string();
            variables.push((variable["name"].as_str().unwrap().to_string(), query));
        }
    }
    (panels, variables)
}

/// A query as Grafana would send it for one task, all servers and a 15 s rate window.
fn as_sent(expr: &str) -> String {
    expr.replace("$__rate_interval", "15s").replace("$task", TASK).replace("$server", ".*")
}

/// The gateway with every kind of series the dashboard reads, and traffic through it.
fn busy_gateway(demo: &Demo) -> (Gateway, TempFile) {
    let policy = TempFile::new("dashboard.cedar");
    std::fs::write(policy.path(), "@id(\"open\")\npermit (principal, action, resource);\n").unwrap();
    let config = format!(
        "[policy]\nfile = {policy:?}\n{store}{gone}discover = false\n[[servers.gone.tools]]\nname = \"legacy_search\"\n\
         inputSchema = {{ type = \"object\" }}\nannotations = {{ readOnlyHint = true }}\n\
         [servers.every]\ntransport = \"stdio\"\ncommand = \"node\"\nargs = [{every:?}, \"stdio\"]\n\
         [tools.legacy_search]\nfallback_tool = \"manga_search\"\n\
         [[quotas.rules]]\nname = \"prices\"\nmatch_tool = \"price_lookup\"\nrate = 1\nwindow_secs = 3600\n",
        policy = policy.path().to_str().unwrap(),
        store = http_server("store", &demo.url()),
        gone = http_server("gone", &format!("http://127.0.0.1:{}/mcp", free_port())),
        every = everything_entry().to_str().unwrap(),
    );
    let gw = Gateway::start(&config, &[]);
    wait_for("the stdio server's tools", || gw.tool_names().iter().any(|n| n == "echo"));
    for query in ["naruto", "one piece", "frieren"] {
        assert!(gw.call("manga_search", json!({"query": query})).get("result").is_some());
    }
    assert!(gw.call("price_lookup", json!({"manga_id": "MNG-00000001"})).get("result").is_some());
    let refused = gw.call("price_lookup", json!({"manga_id": "MNG-00000002"}));
    assert_eq!(refused["error"]["data"]["category"], "rate_limited", "{refused}");
    let fallback = gw.call("legacy_search", json!({"query": "naruto"}));
    assert_eq!(fallback["result"]["_meta"]["fallback_tool"], "manga_search", "{fallback}");
    assert!(gw.call("echo", json!({"message": "hi"})).get("result").is_some());
    assert!(gw.call("no_such_tool", json!({})).get("error").is_some());
    (gw, policy)
}

/// A Prometheus scraping `target` every second, the task label on every series.
fn prometheus(target: &str, data: &Scratch) -> (Proc, String) {
    let port = free_port();
    let config = data.path("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: mcp-gateway\n    \
             static_configs:\n      - targets: [\"{target}\"]\n        labels:\n          aws_ecs_task_arn: \"{TASK}\"\n"
        ),
    )
    .unwrap();
    let mut command = Command::new(tool("prometheus"));
    command
        .arg(format!("--config.file={config}"))
        .arg(format!("--storage.tsdb.path={}", data.path("tsdb")))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--log.level=warn");
    let proc = Proc::spawn("prometheus", command);
    wait_port(port, "prometheus", Duration::from_secs(60));
    (proc, format!("http://127.0.0.1:{port}"))
}

/// Prometheus's answer to an instant query: the result vector, or the parse error.
fn query(client: &reqwest::blocking::Client, base: &str, promql: &str) -> Result<Vec<Value>, String> {
    let answer: Value = client
        .get(
            reqwest::Url::parse_with_params(&format!("{base}/api/v1/query"), [("query", promql)])
                .map_err(|e| e.to_string())?,
        )
        .send()
        .map_err(|e| e.to_string())?
        .json()
        .map_err(|e| e.to_string())?;
    if answer["status"] != "success" {
        return Err(format!("{answer}"));
    }
    Ok(answer["data"]["result"].as_array().cloned().unwrap_or_default())
}

#[test]
fn every_dashboard_query_parses_and_selects_series_of_a_real_gateway() {
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("deploy/grafana-dashboard.json")).unwrap(),
    )
    .unwrap();
    let (panels, variables) = queries(&dashboard);
    assert!(panels.len() >= 20, "{panels:?}");

    // promtool: each query, as sent, as a recording rule.
    let scratch = Scratch::new("dashboard");
    let rules: Vec<Value> = panels
        .iter()
        .enumerate()
        .map(|(i, (_, expr))| json!({"record": format!("dashboard:query_{i}"), "expr": as_sent(expr)}))
        .collect();
    let rules_file = scratch.path("dashboard-rules.json");
    std::fs::write(&rules_file, json!({"groups": [{"name": "dashboard", "rules": rules}]}).to_string())
        .unwrap();
    let checked = Command::new(tool("promtool")).args(["check", "rules", &rules_file]).output().unwrap();
    assert!(
        checked.status.success(),
        "promtool refuses a dashboard query:\n{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );

    let demo = Demo::http();
    let (gw, _policy) = busy_gateway(&demo);
    let target = gw.url("").trim_start_matches("http://").to_string();
    let (_prometheus, base) = prometheus(&target, &scratch);
    let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();

    // Rates need two scrapes in their window: wait until every query selects something, then
    // name the ones that do not.
    let empty = |client: &reqwest::blocking::Client| -> Vec<String> {
        panels
            .iter()
            .filter_map(|(at, expr)| match query(client, &base, &as_sent(expr)) {
                Ok(result) if !result.is_empty() => None,
                Ok(_) => Some(format!("{at}: no series for {}", as_sent(expr))),
                Err(error) => panic!("{at}: Prometheus refuses {}: {error}", as_sent(expr)),
            })
            .collect()
    };
    let mut last = Vec::new();
    let settled = (0..120).any(|_| {
        last = empty(&client);
        if last.is_empty() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(500));
        false
    });
    assert!(settled, "dashboard queries selecting nothing:\n{}", last.join("\n"));

    // The variables: `label_values(metric{…}, label)` lists the task and the servers.
    for (name, variable) in &variables {
        let inner = variable.trim_start_matches("label_values(").trim_end_matches(')');
        let (selector, label) = inner.rsplit_once(',').unwrap_or_else(|| panic!("{name}: {variable}"));
        let values: Value = client
            .get(
                reqwest::Url::parse_with_params(
                    &format!("{base}/api/v1/label/{}/values", label.trim()),
                    [("match[]", as_sent(selector.trim()))],
                )
                .unwrap(),
            )
            .send()
            .unwrap()
            .json()
            .unwrap();
        let values = values["data"].as_array().cloned().unwrap_or_default();
        assert!(!values.is_empty(), "variable {name} lists nothing: {variable}");
        if name == "task" {
            assert_eq!(values, vec![json!(TASK)]);
        }
        if name == "server" {
            for server in ["store", "gone", "every"] {
                assert!(values.contains(&json!(server)), "variable server: {values:?}");
            }
        }
    }
}
