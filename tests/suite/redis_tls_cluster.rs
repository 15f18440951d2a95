//! Redis over TLS (`rediss://`, certificates made by this test with the `openssl` CLI, a
//! private CA given as `redis_ca_file`) and Redis Cluster (three real `redis-server` processes
//! joined by `redis-cli --cluster create`), for both users of Redis: the registry's Redis tier
//! with its invalidation channel, and the shared circuit breakers.

use std::{
    process::Command,
    time::{Duration, Instant},
};

use crate::common::{
    Demo, Gateway, Proc, REGISTRY_LOOPBACK, Scratch, Stores, expect_error, free_port, manga_catalogue,
    manga_tool, metric, private_ca, registry_cli, wait_for, wait_port,
};
use serde_json::{Value, json};

fn run(program: &str, args: &[&str]) -> String {
    let output =
        Command::new(program).args(args).output().unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        output.status.success(),
        "{program} {args:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Where the gateway and the test reach Redis.
struct RedisUnderTest {
    _procs: Vec<Proc>,
    _dir: Scratch,
    /// The gateway's configuration lines for it.
    config: String,
    /// `redis-cli` arguments that reach it (TLS flags or cluster mode).
    cli: Vec<String>,
}

impl RedisUnderTest {
    fn cli(&self, args: &[&str]) -> String {
        let mut all: Vec<&str> = self.cli.iter().map(String::as_str).collect();
        all.extend_from_slice(args);
        run("redis-cli", &all)
    }
}

/// `redis-server` with only a TLS port, its certificate signed by a private CA.
fn tls_redis() -> RedisUnderTest {
    let dir = Scratch::new("redis-tls");
    private_ca(&dir);
    let port = free_port();
    let p = |n: &str| dir.path(n);
    let mut command = Command::new("redis-server");
    command.args([
        "--port",
        "0",
        "--tls-port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--tls-cert-file",
        &p("server.pem"),
        "--tls-key-file",
        &p("server.key"),
        "--tls-ca-cert-file",
        &p("ca.pem"),
        "--tls-auth-clients",
        "no",
    ]);
    let proc = Proc::spawn("redis-server (TLS)", command);
    wait_port(port, "redis-server with --tls-port (needs a TLS-enabled build)", Duration::from_secs(10));
    let cli = vec![
        "--tls".into(),
        "--cacert".into(),
        p("ca.pem"),
        "-h".into(),
        "127.0.0.1".into(),
        "-p".into(),
        port.to_string(),
    ];
    // Plain-text clients are refused: the port really is TLS only.
    let plain = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "PING"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&plain.stdout).contains("PONG"), "the TLS port answered plain text");
    let config = format!("redis_url = \"rediss://127.0.0.1:{port}\"\nredis_ca_file = \"{}\"\n", p("ca.pem"));
    RedisUnderTest { _procs: vec![proc], _dir: dir, config, cli }
}

/// Three `redis-server` processes in cluster mode, slots spread over all three; with `tls`,
/// every client and cluster-bus connection is TLS (as on ElastiCache Serverless).
fn redis_cluster_with(tls: bool) -> RedisUnderTest {
    let dir = Scratch::new("redis-cluster");
    if tls {
        private_ca(&dir);
    }
    let p = |n: &str| dir.path(n);
    let tls_flags: Vec<String> =
        if tls { vec!["--tls".into(), "--cacert".into(), p("ca.pem")] } else { vec![] };
    let mut procs = Vec::new();
    let mut ports = Vec::new();
    for i in 0..3 {
        let (port, bus) = (free_port(), free_port());
        let mut command = Command::new("redis-server");
        command.current_dir(dir.dir()).args([
            "--cluster-port",
            &bus.to_string(),
            "--bind",
            "127.0.0.1",
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            &format!("nodes-{i}.conf"),
            "--save",
            "",
            "--appendonly",
            "no",
        ]);
        if tls {
            command.args([
                "--port",
                "0",
                "--tls-port",
                &port.to_string(),
                "--tls-cluster",
                "yes",
                "--tls-replication",
                "yes",
                "--tls-cert-file",
                &p("server.pem"),
                "--tls-key-file",
                &p("server.key"),
                "--tls-ca-cert-file",
                &p("ca.pem"),
                "--tls-auth-clients",
                "no",
            ]);
        } else {
            command.args(["--port", &port.to_string()]);
        }
        procs.push(Proc::spawn("redis-server (cluster)", command));
        wait_port(port, "redis-server --cluster-enabled", Duration::from_secs(10));
        ports.push(port);
    }
    let nodes: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    // Bounded: `--cluster create` waits forever when the nodes cannot reach each other.
    let mut args: Vec<&str> = vec!["60", "redis-cli"];
    args.extend(tls_flags.iter().map(String::as_str));
    args.extend(["--cluster", "create"]);
    args.extend(nodes.iter().map(String::as_str));
    args.extend(["--cluster-replicas", "0", "--cluster-yes"]);
    run("timeout", &args);
    let deadline = Instant::now() + Duration::from_secs(60);
    for port in &ports {
        loop {
            let mut args: Vec<&str> = tls_flags.iter().map(String::as_str).collect();
            let port = port.to_string();
            args.extend(["-p", &port, "cluster", "info"]);
            let info = run("redis-cli", &args);
            if info.contains("cluster_state:ok") {
                break;
            }
            assert!(Instant::now() < deadline, "cluster never reached cluster_state:ok: {info}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    // Two seeds, the third node is learned from the slot map.
    let scheme = if tls { "rediss" } else { "redis" };
    let mut config = format!(
        "redis_url = \"{scheme}://127.0.0.1:{},{scheme}://127.0.0.1:{}\"\nredis_cluster = true\n",
        ports[0], ports[1]
    );
    if tls {
        config += &format!("redis_ca_file = \"{}\"\n", p("ca.pem"));
    }
    let mut cli = tls_flags;
    cli.extend(["-c".into(), "-p".into(), ports[2].to_string()]);
    RedisUnderTest { _procs: procs, _dir: dir, config, cli }
}

fn redis_cluster() -> RedisUnderTest {
    redis_cluster_with(false)
}

fn registry_entry(name: &str, status: &str, server_url: &str) -> String {
    let tool = manga_tool(name, server_url);
    json!({
        "tool_name": name,
        "definition": {"description": tool["description"], "inputSchema": tool["inputSchema"], "annotations": tool["annotations"]},
        "server": {"name": "catalog", "transport": "http", "url": server_url},
        "status": status,
        "healthy": true,
        "version": 1,
        "updated_at": "2026-01-01T00:00:00Z",
    })
    .to_string()
}

/// A registry entry written straight into Redis is served; a change announced on the
/// invalidation channel is seen at once although the memory tier would keep it for 10 min.
fn registry_through(redis: &RedisUnderTest) {
    let demo = Demo::http();
    redis.cli(&[
        "SET",
        "mcp:tool:inventory_check",
        &registry_entry("inventory_check", "active", &demo.url()),
    ]);
    let config = format!(
        "{}ready_min_tools = 0\n[registry]\nmemory_ttl_secs = 600\nnegative_ttl_secs = 1\nredis_timeout_ms = 2000\n",
        redis.config
    );
    let gw = Gateway::start(&config, REGISTRY_LOOPBACK);

    let answer = gw.call("inventory_check", json!({"manga_ids": ["MNG-00000001"]}));
    assert_eq!(answer["result"]["structuredContent"]["items"][0]["stock"], 59, "{answer}");
    let m = gw.metrics();
    assert_eq!(
        metric(&m, "mcp_gateway_registry_lookups_total", &["tier=\"redis\"", "result=\"hit\""]),
        1.0,
        "{m}"
    );
    assert_eq!(
        metric(&m, "mcp_gateway_registry_lookups_total", &["tier=\"redis\"", "result=\"error\""]),
        0.0,
        "{m}"
    );

    // Retired in Redis and announced: the gateway drops it from memory and reads Redis again.
    redis.cli(&[
        "SET",
        "mcp:tool:inventory_check",
        &registry_entry("inventory_check", "inactive", &demo.url()),
    ]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        // Published until seen: the subscription may still be connecting right after start.
        redis.cli(&["PUBLISH", "mcp:tool:invalidate", "inventory_check"]);
        let answer = gw.call("inventory_check", json!({"manga_ids": ["MNG-00000001"]}));
        if answer["error"]["data"]["category"] == "unknown_tool" {
            break;
        }
        assert!(answer["result"].is_object(), "{answer}");
        assert!(Instant::now() < deadline, "the invalidation was never seen: {answer}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Redis was read again (and found the entry retired) because memory was invalidated.
    let m = gw.metrics();
    assert!(
        metric(&m, "mcp_gateway_registry_lookups_total", &["tier=\"redis\"", "result=\"miss\""]) >= 1.0,
        "{m}"
    );
    assert_eq!(
        metric(&m, "mcp_gateway_registry_lookups_total", &["tier=\"redis\"", "result=\"error\""]),
        0.0,
        "{m}"
    );
}

/// One gateway opens a dead server's breaker; the other refuses with `circuit_open` without
/// ever contacting that server.
fn breakers_through(redis: &RedisUnderTest) {
    let dead = free_port();
    let config = format!(
        "{}shared_breakers = true\nready_min_tools = 0\n[servers.down]\ntransport = \"http\"\nurl = \"http://127.0.0.1:{dead}/mcp\"\ndiscover = false\n[servers.down.breaker]\nopen_base_ms = 20000\nopen_max_ms = 20000\n[[servers.down.tools]]\nname = \"order_status\"\ninputSchema = {{ type = \"object\" }}\n",
        redis.config
    );
    let a = Gateway::start(&config, REGISTRY_LOOPBACK);
    let b = Gateway::start(&config, REGISTRY_LOOPBACK);
    for _ in 0..5 {
        expect_error(&a.call("order_status", json!({})), -32000, "upstream_unavailable");
    }
    expect_error(&a.call("order_status", json!({})), -32004, "circuit_open");
    wait_for("B to take on A's open state", || {
        let report: Value = b.admin_get("/admin/breakers").send().unwrap().json().unwrap();
        report["down"]["state"] == "open"
    });
    for _ in 0..3 {
        expect_error(&b.call("order_status", json!({})), -32004, "circuit_open");
    }
    let mb = b.metrics();
    assert_eq!(
        metric(&mb, "mcp_gateway_upstream_requests_total", &["server=\"down\""]),
        0.0,
        "B contacted the server:\n{mb}"
    );
    let ma = a.metrics();
    assert_eq!(
        metric(&ma, "mcp_gateway_upstream_requests_total", &["server=\"down\"", "status=\"connect_error\""]),
        5.0,
        "{ma}"
    );
    // The open state lives under the hash-tagged key (one slot in a cluster).
    assert_eq!(redis.cli(&["EXISTS", "mcp:{breakers}:open:down"]).trim(), "1");
}

#[test]
fn registry_over_tls_with_a_private_ca() {
    registry_through(&tls_redis());
}

#[test]
fn shared_breakers_over_tls() {
    breakers_through(&tls_redis());
}

#[test]
fn tls_without_the_private_ca_is_refused() {
    // The server certificate is signed by a CA the public roots do not know: no connection.
    let redis = tls_redis();
    let demo = Demo::http();
    redis.cli(&[
        "SET",
        "mcp:tool:inventory_check",
        &registry_entry("inventory_check", "active", &demo.url()),
    ]);
    let config =
        redis.config.lines().filter(|l| !l.starts_with("redis_ca_file")).collect::<Vec<_>>().join("\n");
    let gw = Gateway::start(&format!("{config}\nready_min_tools = 0\n"), REGISTRY_LOOPBACK);
    expect_error(&gw.call("inventory_check", json!({"manga_ids": ["MNG-00000001"]})), -32002, "unknown_tool");
    let m = gw.metrics();
    assert!(
        metric(&m, "mcp_gateway_registry_lookups_total", &["tier=\"redis\"", "result=\"error\""]) >= 1.0,
        "{m}"
    );
}

#[test]
fn registry_over_a_cluster() {
    registry_through(&redis_cluster());
}

#[test]
fn shared_breakers_over_a_cluster() {
    breakers_through(&redis_cluster());
}

#[test]
fn registry_and_shared_breakers_over_a_tls_cluster() {
    let redis = redis_cluster_with(true);
    registry_through(&redis);
    breakers_through(&redis);
}

#[test]
fn a_refresh_writes_every_registry_entry_across_the_cluster_slots() {
    let redis = redis_cluster();
    // DynamoDB only (no Redis in the CLI's environment): the gateway's refresh is what fills Redis.
    let stores = Stores::dynamodb();
    let demo = Demo::http();
    let url = demo.url();
    registry_cli(
        &stores.env(false),
        &["import", "config/manga-tools.json", "--server", "catalog", "--url", &url],
    );
    let names: Vec<String> = manga_catalogue()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    for name in &names {
        assert_eq!(redis.cli(&["EXISTS", &format!("mcp:tool:{name}")]).trim(), "0");
    }
    let config = format!("{}{}[registry]\nredis_timeout_ms = 2000\n", redis.config, stores.config());
    let gw = Gateway::start(&config, REGISTRY_LOOPBACK);
    for name in &names {
        wait_for(&format!("{name} written to the cluster"), || {
            redis.cli(&["EXISTS", &format!("mcp:tool:{name}")]).trim() == "1"
        });
    }
    // The keys really are spread over several slots (so a single pipeline could not hold them).
    let slots: std::collections::BTreeSet<String> = names
        .iter()
        .map(|n| redis.cli(&["CLUSTER", "KEYSLOT", &format!("mcp:tool:{n}")]).trim().to_string())
        .collect();
    assert!(slots.len() > 1, "{slots:?}");
    let m = gw.metrics();
    assert_eq!(
        metric(&m, "mcp_gateway_registry_lookups_total", &["tier=\"redis\"", "result=\"error\""]),
        0.0,
        "{m}"
    );
    assert!(!gw.proc.output().contains("Redis not updated"), "{}", gw.proc.output());
}
