//! The command line as clap reads it: every subcommand, flag and environment variable, with
//! the help text `--help` prints (the doc comments below are that text: edit them as output).

use std::{net::SocketAddr, path::PathBuf};

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(
    name = "mcp-gateway",
    version,
    about = "A sidecar MCP tool gateway: one localhost endpoint for the tools of many MCP servers (AWS Lambda, streamable HTTP, WebSocket, HTTP+SSE, stdio)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Json,
    Text,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run the gateway.
    ///
    /// Configuration comes from --config (TOML), then MCP_GATEWAY_* environment variables
    /// (`__` separates nesting levels, e.g. MCP_GATEWAY_SERVERS__CATALOG__URL), then flags.
    Serve {
        /// TOML configuration file (see config/example.toml).
        #[arg(long, env = "MCP_GATEWAY_CONFIG")]
        config: Option<PathBuf>,
        /// Address to listen on [default: 127.0.0.1:8080].
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// Allow a non-loopback --listen address (callers are anonymous unless [auth] is configured).
        #[arg(long)]
        allow_non_loopback: bool,
        /// Start the store's demo MCP server on a loopback port and register it as `demo`.
        #[arg(long)]
        demo: bool,
        /// Reload the configuration when the --config file changes (it always reloads on SIGHUP
        /// and POST /admin/config/reload); see docs/reload.md.
        #[arg(long, env = "MCP_GATEWAY_WATCH")]
        watch: bool,
        /// Log format on stdout.
        #[arg(long, value_enum, default_value = "json", env = "MCP_GATEWAY_LOG_FORMAT")]
        log_format: LogFormat,
    },
    /// Run the store's demo MCP server on its own.
    DemoServer {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:8081")]
        listen: SocketAddr,
        /// Serve it as a Lambda function behind the Lambda Invoke REST API
        /// (POST /2015-03-31/functions/{name}/invocations) instead of streamable HTTP.
        #[arg(long)]
        lambda_api: bool,
        /// Answer every tools/call after this many milliseconds (to demonstrate deadlines).
        #[arg(long, default_value_t = 0)]
        delay_ms: u64,
        /// Behave as a session-era server (initialize required, Mcp-Session-Id checked).
        #[arg(long)]
        sessions: bool,
        /// Also offer this many generated read-only tools `bulk_00000`, `bulk_00001`, … (a large
        /// catalogue, for scale tests and benchmarks); each echoes its `n` argument.
        #[arg(long, default_value_t = 0)]
        extra_tools: usize,
    },
    /// Manage the DynamoDB tool registry (table from --table, dynamodb_table, or
    /// mcp-tool-registry; endpoint, region and Redis from the configuration/environment).
    Registry {
        #[arg(long, env = "MCP_GATEWAY_CONFIG")]
        config: Option<PathBuf>,
        /// Table name (overrides `dynamodb_table`).
        #[arg(long)]
        table: Option<String>,
        #[command(subcommand)]
        action: RegistryAction,
    },
    /// Probe a running gateway for a container health check: GET URL (2 s timeout), exit 0 on
    /// 2xx, else 1 with one line why. No shell or curl needed.
    ///
    /// The default is liveness (/healthz on the configured listen port): an upstream outage
    /// must not make the orchestrator restart the sidecar. Use --url …/readyz for readiness.
    Healthcheck {
        /// What to probe [default: http://127.0.0.1:<listen port>/healthz].
        #[arg(long)]
        url: Option<String>,
        /// Configuration to read the listen address from (when --url is not given).
        #[arg(long, env = "MCP_GATEWAY_CONFIG")]
        config: Option<PathBuf>,
    },
    /// The tool catalogue for model APIs.
    Tools {
        #[command(subcommand)]
        action: ToolsAction,
    },
    /// Load and validate the configuration, print it as the gateway sees it (TOML, secrets
    /// redacted: it can be copied back into a file), and exit.
    CheckConfig {
        #[arg(long, env = "MCP_GATEWAY_CONFIG")]
        config: Option<PathBuf>,
        /// Print the configuration as JSON (same keys as the TOML file).
        #[arg(long)]
        json: bool,
        /// Check it as `serve --demo` would run it: with the embedded demo server registered
        /// as `demo` (endpoints and hooks may name it).
        #[arg(long)]
        demo: bool,
    },
}

#[derive(Subcommand)]
pub enum ToolsAction {
    /// Print the catalogue in a model API's tool shape (JSON, as `GET /tools?format=F`).
    ///
    /// With --url, from a running gateway (its MCP endpoint's `tools/list`); otherwise built
    /// from the configuration and registry as `serve` would (one refresh of every server and
    /// registry tier), without serving.
    Export {
        /// mcp | bedrock | anthropic | openai | openai-responses | gemini
        #[arg(long, default_value = "mcp")]
        format: String,
        /// OpenAI strict mode (openai, openai-responses).
        #[arg(long)]
        strict: bool,
        /// Leave out the tools of unavailable servers (default: `hide_unavailable_tools`).
        #[arg(long)]
        hide_unavailable: bool,
        /// MCP endpoint of a running gateway, e.g. http://127.0.0.1:8080/mcp (a bare
        /// http://host:port means its /mcp).
        #[arg(long, conflicts_with = "config")]
        url: Option<String>,
        /// With --url: a file holding the bearer token to send (a gateway with `[auth] mode =
        /// "jwt"` lists only what that caller may call).
        #[arg(long, requires = "url")]
        token_file: Option<PathBuf>,
        #[arg(long, env = "MCP_GATEWAY_CONFIG")]
        config: Option<PathBuf>,
        /// Without --url: the catalogue as the endpoint `[endpoints.NAME]` serves it (with
        /// --url, name the endpoint's URL: http://host:port/mcp/NAME).
        #[arg(long, conflicts_with = "url")]
        endpoint: Option<String>,
    },
}

#[derive(Subcommand)]
pub enum RegistryAction {
    /// Create the table (on-demand billing); succeeds if it exists.
    CreateTable,
    /// Write one tool from a JSON file: {name, description, inputSchema, annotations,
    /// server: {name, transport, url | function, qualifier}, status?, healthy?}.
    Put { file: PathBuf },
    /// Print one tool as stored.
    Get { name: String },
    /// List the active tools, one JSON line each.
    List,
    /// Delete a tool.
    Delete { name: String },
    /// Approve pending tool (or prompt) definition changes on a running gateway
    /// (`catalogue.pin_tool_definitions`): POST /admin/registry/approve. Needs no DynamoDB.
    Approve {
        /// The tool: its name on its server, or its namespaced `server__tool` name.
        #[arg(required_unless_present_any = ["all", "prompt", "origin"])]
        tool: Option<String>,
        /// The new target origin of the OpenAPI server `--server` (its document's `servers`
        /// URL moved to another origin).
        #[arg(long, requires = "server", conflicts_with_all = ["tool", "prompt", "all"])]
        origin: bool,
        /// A federated prompt instead of a tool: its name on its server, or `server__prompt`.
        #[arg(long, conflicts_with = "tool")]
        prompt: Option<String>,
        /// Approve every pending change (tools and prompts).
        #[arg(long, conflicts_with_all = ["tool", "prompt"])]
        all: bool,
        /// Only the change of this server (when several servers changed a tool of that name).
        #[arg(long)]
        server: Option<String>,
        /// The gateway's base URL [default: http://<admin.listen, else listen, from the
        /// configuration>]. The admin token (admin.token / admin.token_file) comes from the
        /// same configuration and environment.
        #[arg(long)]
        url: Option<String>,
    },
    /// Import every tool of a {"tools": [...]} file (e.g. config/manga-tools.json) onto one server.
    Import {
        file: PathBuf,
        /// The server the tools live on.
        #[arg(long)]
        server: String,
        /// http | lambda | websocket | sse | stdio
        #[arg(long, default_value = "http")]
        transport: String,
        #[arg(long)]
        url: Option<String>,
        #[arg(long)]
        function: Option<String>,
        #[arg(long)]
        qualifier: Option<String>,
        /// stdio: the name of one of the gateway's `stdio_commands`.
        #[arg(long)]
        command: Option<String>,
    },
}
