//! Upstream credentials against real components: OAuth 2.0 servers from npm (`oidc-provider`
//! as the gateway's authorization server, `oauth2-mock-server` as the shoppers' identity
//! provider; `tests/peers/identity/oauth_peer.mjs`), a Python MCP SDK server that admits only JWTs it
//! verifies against the authorization server's JWKS (`auth_mcp_server.py`), and an IAM front
//! door that recomputes every SigV4 signature with botocore (`sigv4_proxy.py`).
//!
//! - client credentials: one token request, reused by every call; a token the server revokes
//!   is refused (401), renewed once and the call tried once more; a wrong secret fails the call
//!   as `upstream_auth` and reaches no server; the secret never appears in logs or
//!   `check-config`.
//! - token exchange (at the transport, with a shopper's token from the identity provider): the
//!   server sees `sub` = the shopper, `aud` = itself; one exchange per shopper; no caller
//!   token → `unauthenticated`, nothing sent; a token the authorization server will not
//!   exchange → `forbidden`. End to end, an anonymous caller is refused and nothing is sent,
//!   and an exchanged token is not used past the caller's own `exp` (the authorization server
//!   is asked again).
//! - pass-through: the caller's own token reaches the server unchanged; none → refused.
//! - SigV4: the gateway's signed requests pass botocore's check; with a wrong secret they are
//!   refused (403 → `upstream_auth`).
//! - the store example (`config/store-identity.toml` and `config/store-policy.cedar`, exactly):
//!   shoppers' tokens from the identity provider decide what each sees and may call by scope,
//!   and the shopper's token reaches the checkout server by token exchange.

use crate::common;

use std::{process::Command, sync::Arc, time::Duration};

use crate::common::{
    BIN, Gateway, Proc, Scratch, expect_error, free_port, metric, node22, peers_dir, python, wait_for,
};
use serde_json::{Value, json};
use tower::{Service, ServiceExt};

use mcp_gateway::{
    config::{AuthKind, Config, UpstreamAuthConfig},
    identity::Caller,
    upstream::{
        CredentialFailure, UpstreamError, UpstreamReply, UpstreamRequest,
        credentials::{CredentialMetrics, Credentials},
        http::{HttpSettings, HttpTransport},
    },
};

pub(crate) const SECRET: &str = "s3cret-Kx9-never-print-me";

/// The OAuth peer: its identity provider, authorization server and control URLs.
pub(crate) struct OAuth {
    /// The OAuth peer process, killed when the test ends.
    _proc: Proc,
    idp: String,
    pub(crate) server: String,
    control: String,
}

impl OAuth {
    pub(crate) fn start(secret_file: &str) -> Self {
        Self::start_with(secret_file, &[])
    }

    fn start_with(secret_file: &str, options: &[&str]) -> Self {
        for package in ["oidc-provider", "oauth2-mock-server"] {
            assert!(
                peers_dir().join("node_modules").join(package).exists(),
                "npm {package} is missing: run scripts/install-test-deps.sh"
            );
        }
        let mut command = Command::new(node22());
        command
            .arg(peers_dir().join("identity/oauth_peer.mjs"))
            .args(["--secret-file", secret_file])
            .args(options);
        let mut proc = Proc::spawn("oauth-peer", command);
        let line = proc.wait_line("READY ", Duration::from_secs(30));
        let urls: Value = serde_json::from_str(line.trim_start_matches("READY ")).expect("READY JSON");
        let url = |k: &str| urls[k].as_str().unwrap().to_string();
        Self { idp: url("idp"), server: url("as"), control: url("control"), _proc: proc }
    }

    /// Token requests the authorization server answered, by `grant:outcome`.
    fn count(&self, key: &str) -> u64 {
        let stats: Value = reqwest::blocking::get(format!("{}/stats", self.control)).unwrap().json().unwrap();
        stats[key].as_u64().unwrap_or(0)
    }

    pub(crate) fn client_credentials(&self) -> u64 {
        self.count("client_credentials:success")
    }

    fn exchanges(&self) -> u64 {
        self.count("urn:ietf:params:oauth:grant-type:token-exchange:success")
    }

    /// A shopper's access token, from a real password-grant request to the identity provider.
    fn shopper_token(&self, user: &str) -> String {
        self.shopper_token_with_scope(user, "")
    }

    /// A shopper's access token carrying `scope` (none when empty).
    fn shopper_token_with_scope(&self, user: &str, scope: &str) -> String {
        let scope =
            if scope.is_empty() { String::new() } else { format!("&scope={}", scope.replace(' ', "+")) };
        let answer: Value = reqwest::blocking::Client::new()
            .post(format!("{}/token", self.idp))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("grant_type=password&username={user}&password=pw&client_id=storefront{scope}"))
            .send()
            .unwrap()
            .json()
            .unwrap();
        answer["access_token"].as_str().expect("an access token").to_string()
    }

    /// A shopper's access token (for the gateway, see `--shopper-audience`) whose `exp` is
    /// `seconds` from now, and that `exp`.
    fn short_lived_shopper_token(&self, user: &str, seconds: u64) -> (String, u64) {
        let answer: Value = reqwest::blocking::Client::new()
            .post(format!("{}/token", self.idp))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!(
                "grant_type=password&username={user}&password=pw&client_id=storefront&expires_in={seconds}"
            ))
            .send()
            .unwrap()
            .json()
            .unwrap();
        let token = answer["access_token"].as_str().expect("an access token").to_string();
        let payload = token.split('.').nth(1).expect("a JWT");
        let claims: Value = serde_json::from_slice(
            &base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, payload).unwrap(),
        )
        .unwrap();
        let exp = claims["exp"].as_u64().expect("an exp claim");
        (token, exp)
    }

    /// Exchange requests the authorization server answered, granted or refused.
    fn exchange_requests(&self) -> u64 {
        self.exchanges() + self.count("urn:ietf:params:oauth:grant-type:token-exchange:error")
    }

    /// A token of the identity provider not issued to the storefront (no `aud`): the
    /// authorization server must refuse to exchange it.
    fn foreign_token(&self) -> String {
        let answer: Value = reqwest::blocking::Client::new()
            .post(format!("{}/token", self.idp))
            .header("content-type", "application/x-www-form-urlencoded")
            .body("grant_type=client_credentials&client_id=someone-else")
            .send()
            .unwrap()
            .json()
            .unwrap();
        answer["access_token"].as_str().expect("an access token").to_string()
    }
}

/// `auth_mcp_server.py`: admits JWTs of `issuer` (keys from `jwks`) for `audience`.
pub(crate) struct Guarded {
    _proc: Proc,
    pub(crate) url: String,
}

impl Guarded {
    pub(crate) fn start(issuer: &str, jwks: &str, audience: &str) -> Self {
        Self::start_with(issuer, jwks, audience, &[])
    }

    fn start_with(issuer: &str, jwks: &str, audience: &str, options: &[&str]) -> Self {
        let port = free_port();
        let mut command = Command::new(python());
        command.arg(peers_dir().join("servers/auth_mcp_server.py")).arg(port.to_string()).args([
            "--jwks",
            jwks,
            "--issuer",
            issuer,
            "--audience",
            audience,
        ]);
        command.args(options);
        let proc = Proc::spawn_until("auth-mcp-server", command, "READY");
        Self { _proc: proc, url: format!("http://127.0.0.1:{port}") }
    }

    pub(crate) fn seen(&self) -> Vec<Value> {
        let seen: Value =
            reqwest::blocking::get(format!("{}/control/seen", self.url)).unwrap().json().unwrap();
        seen.as_array().unwrap().clone()
    }

    pub(crate) fn refused(&self, reason: &str) -> u64 {
        let refused: Value =
            reqwest::blocking::get(format!("{}/control/refused", self.url)).unwrap().json().unwrap();
        refused[reason].as_u64().unwrap_or(0)
    }

    pub(crate) fn revoke_seen(&self) {
        reqwest::blocking::Client::new().post(format!("{}/control/revoke-seen", self.url)).send().unwrap();
    }
}

pub(crate) fn secret_file(scratch: &Scratch, value: &str) -> String {
    let path = scratch.path("client-secret");
    std::fs::write(&path, format!("{value}\n")).unwrap();
    path
}

pub(crate) fn whoami(response: &Value) -> Value {
    let text = response["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{response}"));
    serde_json::from_str(text).unwrap_or_else(|_| response["result"]["structuredContent"].clone())
}

#[test]
fn client_credentials_are_fetched_once_reused_and_renewed_once_after_a_401() {
    let scratch = Scratch::new("cc");
    let secret_path = secret_file(&scratch, SECRET);
    let oauth = OAuth::start(&secret_path);
    let upstream = Guarded::start(&oauth.server, &format!("{}/jwks", oauth.server), "urn:mcp:checkout");
    let config = format!(
        r#"
listen = "127.0.0.1:0"
log_level = "debug"
[servers.checkout]
transport = "http"
url = "{}/mcp"
[servers.checkout.auth]
kind = "client_credentials"
token_url = "{}/token"
client_id = "mcp-gateway"
client_secret_file = "{secret_path}"
scopes = ["cart:read"]
resource = "urn:mcp:checkout"
"#,
        upstream.url, oauth.server
    );
    let gateway = Gateway::start(&config, &[]);
    for _ in 0..3 {
        let claims = whoami(&gateway.call("whoami", json!({})));
        assert_eq!(claims["sub"], "mcp-gateway", "{claims}");
        assert_eq!(claims["aud"], "urn:mcp:checkout", "{claims}");
        assert_eq!(claims["client_id"], "mcp-gateway", "{claims}");
    }
    assert_eq!(oauth.client_credentials(), 1, "discovery and three calls share one token");
    let jtis: std::collections::BTreeSet<String> =
        upstream.seen().iter().map(|c| c["jti"].as_str().unwrap().to_string()).collect();
    assert_eq!(jtis.len(), 1, "the server saw one token: {jtis:?}");

    // The server revokes it: the next call is refused once, renews, and succeeds.
    upstream.revoke_seen();
    let claims = whoami(&gateway.call("whoami", json!({})));
    assert_eq!(claims["sub"], "mcp-gateway");
    assert_eq!(upstream.refused("revoked"), 1, "one refusal, then the renewed token");
    assert_eq!(oauth.client_credentials(), 2, "exactly one renewal");
    let metrics = gateway.metrics();
    assert_eq!(metric(&metrics, "mcp_gateway_upstream_auth_retries_total", &["server=\"checkout\""]), 1.0);
    assert_eq!(
        metric(
            &metrics,
            "mcp_gateway_upstream_token_fetches_total",
            &["server=\"checkout\"", "kind=\"client_credentials\"", "outcome=\"success\""]
        ),
        2.0
    );
    assert!(!metrics.contains("mcp-gateway\""), "no client or subject in a label");

    // Secrets: never in the log (debug level), never in check-config.
    let log = gateway.proc.output();
    assert!(!log.contains(SECRET), "the client secret leaked into the log");
    assert!(!log.contains("Bearer ey"), "a token leaked into the log");
    let config_file = scratch.path("gateway.toml");
    std::fs::write(&config_file, &config).unwrap();
    let printed =
        Command::new(BIN).args(["check-config", "--json", "--config", &config_file]).output().unwrap();
    assert!(printed.status.success(), "{}", String::from_utf8_lossy(&printed.stderr));
    let printed = String::from_utf8_lossy(&printed.stdout);
    assert!(printed.contains("client_secret_file"), "{printed}");
    assert!(!printed.contains(SECRET), "check-config printed the secret");
}

#[test]
fn a_refused_client_fails_the_call_as_upstream_auth_and_reaches_no_server() {
    let scratch = Scratch::new("cc-bad");
    let oauth = OAuth::start(&secret_file(&scratch, SECRET));
    let upstream = Guarded::start(&oauth.server, &format!("{}/jwks", oauth.server), "urn:mcp:checkout");
    let wrong = "not-the-secret";
    let config = format!(
        r#"
listen = "127.0.0.1:0"
[servers.checkout]
transport = "http"
url = "{}/mcp"
discover = false
tools = [{{name = "whoami", inputSchema = {{type = "object"}}}}]
[servers.checkout.auth]
kind = "client_credentials"
token_url = "{}/token"
client_id = "mcp-gateway-post"
client_auth = "post"
client_secret_env = "CHECKOUT_CLIENT_SECRET"
resource = "urn:mcp:checkout"
"#,
        upstream.url, oauth.server
    );
    let gateway = Gateway::start(&config, &[("CHECKOUT_CLIENT_SECRET", wrong)]);
    let answer = gateway.call("whoami", json!({}));
    let data = expect_error(&answer, -32007, "upstream_auth");
    assert_eq!(data["retryable"], false);
    assert!(upstream.seen().is_empty(), "nothing reached the server");
    assert_eq!(upstream.refused("missing"), 0, "not even an anonymous request");
    assert_eq!(oauth.count("client_credentials:error"), 1);
    let metrics = gateway.metrics();
    assert_eq!(
        metric(
            &metrics,
            "mcp_gateway_upstream_token_fetches_total",
            &["server=\"checkout\"", "kind=\"client_credentials\"", "outcome=\"refused\""]
        ),
        1.0
    );
    assert!(!gateway.proc.output().contains(wrong), "the (wrong) secret leaked into the log");
    let printed = Command::new(BIN)
        .args(["check-config", "--json"])
        .env("MCP_GATEWAY_SERVERS__X__TRANSPORT", "http")
        .env("MCP_GATEWAY_SERVERS__X__URL", "http://127.0.0.1:1/mcp")
        .env("MCP_GATEWAY_SERVERS__X__AUTH", r#"{kind = "client_credentials", token_url = "https://a.example/token", client_id = "c", client_secret_env = "CHECKOUT_CLIENT_SECRET"}"#)
        .env("CHECKOUT_CLIENT_SECRET", wrong)
        .output()
        .unwrap();
    assert!(printed.status.success(), "{}", String::from_utf8_lossy(&printed.stderr));
    assert!(!String::from_utf8_lossy(&printed.stdout).contains(wrong));
}

fn credential_metrics() -> CredentialMetrics {
    CredentialMetrics {
        fetches: prometheus::IntCounterVec::new(
            prometheus::Opts::new("f", "f"),
            &["server", "kind", "outcome"],
        )
        .unwrap(),
        retries: prometheus::IntCounterVec::new(prometheus::Opts::new("r", "r"), &["server"]).unwrap(),
    }
}

fn transport(url: &str, auth: &UpstreamAuthConfig) -> HttpTransport {
    let credentials =
        Credentials::new("checkout", auth, &Config::default(), Duration::from_secs(2), credential_metrics())
            .unwrap();
    HttpTransport::new(HttpSettings {
        url: format!("{url}/mcp").parse().unwrap(),
        connect_timeout: Duration::from_secs(2),
        headers: Default::default(),
        max_response_bytes: 1 << 20,
        credentials: Some(credentials),
    })
    .unwrap()
}

fn caller(token: Option<String>) -> Arc<Caller> {
    Arc::new(Caller {
        subject: token.as_ref().map(|_| "shopper".into()),
        token: token.map(Into::into),
        ..Caller::default()
    })
}

async fn call_whoami(transport: &mut HttpTransport, caller: Arc<Caller>) -> Result<Value, UpstreamError> {
    let mut params = serde_json::Map::new();
    params.insert("name".into(), json!("whoami"));
    params.insert("arguments".into(), json!({}));
    let mut request = UpstreamRequest::new("tools/call", params);
    request.tool = Some("whoami".into());
    request.caller = Some(caller);
    match transport.ready().await?.call(request).await? {
        UpstreamReply::Result(raw) => {
            let result: Value = serde_json::from_str(raw.get()).unwrap();
            Ok(serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap())
        }
        UpstreamReply::Error(error) => panic!("the server answered an error: {error:?}"),
    }
}

fn failure(result: Result<Value, UpstreamError>) -> CredentialFailure {
    match result {
        Err(UpstreamError::Credentials { failure, .. }) => failure,
        other => panic!("expected a credentials failure, got {other:?}"),
    }
}

#[test]
fn token_exchange_acts_for_the_shopper_once_per_shopper_and_never_anonymously() {
    let scratch = Scratch::new("exchange");
    let oauth = OAuth::start(&secret_file(&scratch, SECRET));
    let upstream = Guarded::start(&oauth.server, &format!("{}/jwks", oauth.server), "urn:mcp:checkout");
    let alice = oauth.shopper_token("shopper-42");
    let bob = oauth.shopper_token("shopper-77");
    let foreign = oauth.foreign_token();
    let auth = UpstreamAuthConfig {
        token_url: Some(format!("{}/token", oauth.server)),
        client_id: Some("mcp-gateway".into()),
        client_secret_file: Some(scratch.path("client-secret").into()),
        resource: Some("urn:mcp:checkout".into()),
        scopes: vec!["orders:read".into()],
        ..UpstreamAuthConfig::new(AuthKind::TokenExchange)
    };
    // The checks use blocking HTTP clients: only the transport's calls run on the runtime.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut transport = transport(&upstream.url, &auth);
    let mut call = |caller| runtime.block_on(call_whoami(&mut transport, caller));
    for _ in 0..2 {
        let claims = call(caller(Some(alice.clone()))).unwrap();
        assert_eq!(claims["sub"], "shopper-42", "{claims}");
        assert_eq!(claims["aud"], "urn:mcp:checkout", "{claims}");
        assert_eq!(claims["act"]["sub"], "mcp-gateway", "{claims}");
        assert_eq!(claims["scope"], "orders:read", "{claims}");
    }
    assert_eq!(oauth.exchanges(), 1, "one exchange per shopper token, then the cache");
    let claims = call(caller(Some(bob.clone()))).unwrap();
    assert_eq!(claims["sub"], "shopper-77");
    assert_eq!(oauth.exchanges(), 2);

    let seen_before = upstream.seen().len();
    assert_eq!(failure(call(caller(None))), CredentialFailure::NoCallerToken);
    assert_eq!(failure(call(caller(Some(foreign)))), CredentialFailure::CallerTokenRefused);
    assert_eq!(upstream.seen().len(), seen_before, "nothing was sent without an exchanged token");
    assert_eq!(upstream.refused("missing"), 0, "never an anonymous request");
    // The shopper's own token is never what the server gets.
    assert!(upstream.seen().iter().all(|c| c["aud"] == "urn:mcp:checkout"));
}

#[test]
fn passthrough_forwards_the_callers_own_token_and_nothing_without_one() {
    let scratch = Scratch::new("passthrough");
    let oauth = OAuth::start(&secret_file(&scratch, SECRET));
    // A server that accepts the storefront's own tokens (the case pass-through is for).
    let upstream = Guarded::start(&oauth.idp, &format!("{}/jwks", oauth.idp), "storefront");
    let alice = oauth.shopper_token("shopper-42");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut transport = transport(&upstream.url, &UpstreamAuthConfig::new(AuthKind::Passthrough));
    let mut call = |caller| runtime.block_on(call_whoami(&mut transport, caller));
    let claims = call(caller(Some(alice))).unwrap();
    assert_eq!(claims["sub"], "shopper-42");
    assert_eq!(claims["aud"], "storefront");
    let before = upstream.seen().len();
    assert_eq!(failure(call(caller(None))), CredentialFailure::NoCallerToken);
    assert_eq!(upstream.seen().len(), before);
    assert_eq!(upstream.refused("missing"), 0);
    assert_eq!(oauth.exchanges(), 0);
}

#[test]
fn an_anonymous_caller_of_a_token_exchange_server_is_refused_and_nothing_is_sent() {
    let scratch = Scratch::new("exchange-anon");
    let oauth = OAuth::start(&secret_file(&scratch, SECRET));
    let upstream = Guarded::start(&oauth.server, &format!("{}/jwks", oauth.server), "urn:mcp:checkout");
    let config = format!(
        r#"
listen = "127.0.0.1:0"
[servers.checkout]
transport = "http"
url = "{}/mcp"
discover = false
tools = [{{name = "whoami", inputSchema = {{type = "object"}}, annotations = {{readOnlyHint = true}}}}]
[servers.checkout.auth]
kind = "token_exchange"
token_url = "{}/token"
client_id = "mcp-gateway"
client_secret_file = "{}"
resource = "urn:mcp:checkout"
"#,
        upstream.url,
        oauth.server,
        scratch.path("client-secret")
    );
    let gateway = Gateway::start(&config, &[]);
    let answer = gateway.call("whoami", json!({}));
    expect_error(&answer, -32009, "unauthenticated");
    assert!(upstream.seen().is_empty());
    assert_eq!(upstream.refused("missing"), 0, "never sent anonymously");
    assert_eq!(oauth.exchanges() + oauth.client_credentials(), 0, "no token was asked for");
}

#[test]
fn an_exchanged_token_is_not_used_past_the_callers_own_exp() {
    let scratch = Scratch::new("exchange-exp");
    // Shoppers' tokens are for the gateway, which checks them (JWT mode, default 60 s leeway).
    let oauth = OAuth::start_with(&secret_file(&scratch, SECRET), &["--shopper-audience", "mcp-gateway"]);
    let upstream = Guarded::start(&oauth.server, &format!("{}/jwks", oauth.server), "urn:mcp:checkout");
    let config = format!(
        r#"
listen = "127.0.0.1:0"
[auth]
mode = "jwt"
issuer = "{idp}"
audience = "mcp-gateway"
jwks_url = "{idp}/jwks"
[servers.checkout]
transport = "http"
url = "{url}/mcp"
discover = false
tools = [{{name = "whoami", inputSchema = {{type = "object"}}, annotations = {{readOnlyHint = true}}}}]
[servers.checkout.auth]
kind = "token_exchange"
token_url = "{server}/token"
client_id = "mcp-gateway"
client_secret_file = "{secret}"
resource = "urn:mcp:checkout"
"#,
        idp = oauth.idp,
        url = upstream.url,
        server = oauth.server,
        secret = scratch.path("client-secret"),
    );
    let gateway = Gateway::start(&config, &[]);
    // The exchanged token lives an hour (the authorization server's TTL); the shopper's 3 s.
    let (shopper, exp) = oauth.short_lived_shopper_token("shopper-5", 3);
    let claims = whoami(&call_as(&gateway, &shopper, "whoami", json!({})));
    assert_eq!(claims["sub"], "shopper-5", "{claims}");
    assert_eq!(oauth.exchange_requests(), 1);
    let seen = upstream.seen();
    let exchanged = seen[0]["jti"].as_str().expect("the exchanged token's jti").to_string();
    assert!(seen.iter().all(|c| c["jti"] == exchanged.as_str()), "one exchanged token: {seen:?}");
    let uses_before_exp = seen.len();

    // Past the shopper's exp, still inside the gateway's leeway: the gateway accepts the
    // caller, but the exchanged token must not outlive the caller's own.
    wait_for("the shopper's token to expire", || {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        now > exp
    });
    let answer = call_as(&gateway, &shopper, "whoami", json!({}));
    assert_eq!(
        oauth.exchange_requests(),
        2,
        "the token endpoint was asked again for the expired caller: {answer}"
    );
    let uses = upstream.seen().iter().filter(|c| c["jti"] == exchanged.as_str()).count();
    assert_eq!(uses, uses_before_exp, "the exchanged token was used after the caller's exp: {answer}");
}

/// `python_server.py` behind `sigv4_proxy.py` (botocore checks every signature).
struct SignedUpstream {
    _backend: Proc,
    proxy: Proc,
    url: String,
}

const ACCESS_KEY: &str = "AKIDH7TESTEXAMPLE";
const SECRET_KEY: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYH7TESTKEY";

impl SignedUpstream {
    fn start(service: &str) -> Self {
        let backend_port = free_port();
        let backend = common::python_server(backend_port);
        let port = free_port();
        let mut command = Command::new(common::formats_python());
        command.arg(peers_dir().join("proxies/sigv4_proxy.py")).arg(port.to_string()).args([
            "--backend",
            &format!("http://127.0.0.1:{backend_port}"),
            "--access-key",
            ACCESS_KEY,
            "--secret-key",
            SECRET_KEY,
            "--region",
            "ap-northeast-1",
            "--service",
            service,
        ]);
        let proxy = Proc::spawn_until("sigv4-proxy", command, "READY");
        Self { _backend: backend, proxy, url: format!("http://127.0.0.1:{port}") }
    }

    fn stats(&self) -> Value {
        reqwest::blocking::get(format!("{}/control/stats", self.url)).unwrap().json().unwrap()
    }
}

fn sigv4_config(url: &str, service: &str, discover: bool) -> String {
    let tools = if discover {
        String::new()
    } else {
        "discover = false\ntools = [{name = \"add\", inputSchema = {type = \"object\"}}]\n".into()
    };
    format!(
        r#"
listen = "127.0.0.1:0"
[aws]
region = "ap-northeast-1"
[servers.orders]
transport = "http"
url = "{url}/mcp"
{tools}[servers.orders.auth]
kind = "sigv4"
service = "{service}"
"#
    )
}

fn aws_env(secret: &'static str) -> Vec<(&'static str, &'static str)> {
    vec![
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY),
        ("AWS_SECRET_ACCESS_KEY", secret),
        ("AWS_EC2_METADATA_DISABLED", "true"),
        ("AWS_CONFIG_FILE", "/nonexistent"),
        ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent"),
    ]
}

#[test]
fn sigv4_signatures_pass_botocores_check_and_a_wrong_secret_is_refused() {
    let upstream = SignedUpstream::start("lambda");
    let gateway = Gateway::start(&sigv4_config(&upstream.url, "lambda", true), &aws_env(SECRET_KEY));
    for (a, b) in [(2, 3), (40, 2)] {
        let answer = gateway.call("add", json!({"a": a, "b": b}));
        let text = answer["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{answer}"));
        assert_eq!(text, (a + b).to_string());
    }
    let stats = upstream.stats();
    assert_eq!(stats["refused"], 0, "{stats}");
    assert!(stats["verified"].as_u64().unwrap() >= 3, "discovery and two calls were signed: {stats}");
    let metrics = gateway.metrics();
    assert_eq!(
        metric(
            &metrics,
            "mcp_gateway_upstream_token_fetches_total",
            &["server=\"orders\"", "kind=\"sigv4\"", "outcome=\"success\""]
        ),
        1.0,
        "credentials resolved once"
    );
    assert!(!gateway.proc.output().contains(SECRET_KEY));

    // The same requests signed with a secret that is not the key's: refused, not forwarded.
    let tampered = Gateway::start(
        &sigv4_config(&upstream.url, "lambda", false),
        &aws_env("wJalrXUtnFEMI/K7MDENG+bPxRfiCYWRONGSECRET"),
    );
    let verified_before = upstream.stats()["verified"].as_u64().unwrap();
    let answer = tampered.call("add", json!({"a": 1, "b": 1}));
    expect_error(&answer, -32007, "upstream_auth");
    let stats = upstream.stats();
    assert_eq!(stats["verified"].as_u64().unwrap(), verified_before, "{stats}");
    assert_eq!(stats["reasons"]["signature mismatch"], 1, "{stats}\n{}", upstream.proxy.output());
}

/// The store's four read-only tools (from the demo server).
const STORE_READ_ONLY: [&str; 4] =
    ["inventory_check", "manga_recommendations", "manga_search", "price_lookup"];

/// POSTs `message` to the gateway with the caller's bearer token (none: anonymous).
fn post_as(gateway: &Gateway, token: Option<&str>, message: &Value) -> (u16, Value) {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", a.as_str())).collect();
    let (status, _, body) = gateway.post_raw(message.to_string(), &headers);
    (status, if body.is_empty() { Value::Null } else { serde_json::from_str(&body).unwrap() })
}

fn listed_as(gateway: &Gateway, token: &str) -> Vec<String> {
    let (status, body) =
        post_as(gateway, Some(token), &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    assert_eq!(status, 200, "{body}");
    let mut names: Vec<String> = body["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

fn call_as(gateway: &Gateway, token: &str, tool: &str, arguments: Value) -> Value {
    let message = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": tool, "arguments": arguments}});
    let (status, body) = post_as(gateway, Some(token), &message);
    assert_eq!(status, 200, "{body}");
    body
}

#[test]
fn the_store_example_gives_each_shopper_their_tools_and_sends_the_shopper_to_checkout_by_token_exchange() {
    let scratch = Scratch::new("store-example");
    // The store's identity provider issues shoppers' tokens for the gateway (`aud` =
    // "mcp-gateway", as `[auth] audience` says); its authorization server exchanges them.
    let oauth = OAuth::start_with(&secret_file(&scratch, SECRET), &["--shopper-audience", "mcp-gateway"]);
    let checkout = Guarded::start_with(
        &oauth.server,
        &format!("{}/jwks", oauth.server),
        "urn:mcp:checkout",
        &["--store"],
    );
    let config =
        std::fs::read_to_string(crate::common::repo_root().join("config/store-identity.toml")).unwrap();
    let (idp_jwks, checkout_url, token_url) =
        (format!("{}/jwks", oauth.idp), format!("{}/mcp", checkout.url), format!("{}/token", oauth.server));
    // Exactly the example's files; only addresses and the client secret come from the
    // environment, as the file's header says.
    let gateway = Gateway::start_with_args(
        &config,
        &[
            ("MCP_GATEWAY_AUTH__ISSUER", oauth.idp.as_str()),
            ("MCP_GATEWAY_AUTH__JWKS_URL", idp_jwks.as_str()),
            ("MCP_GATEWAY_SERVERS__CHECKOUT__URL", checkout_url.as_str()),
            ("MCP_GATEWAY_SERVERS__CHECKOUT__AUTH__TOKEN_URL", token_url.as_str()),
            ("STORE_CHECKOUT_CLIENT_SECRET", SECRET),
        ],
        &["--demo"],
    );
    let browse = oauth.shopper_token_with_scope("bob", "store:browse");
    let buy = oauth.shopper_token_with_scope("carol", "store:browse store:buy");

    // store:browse: the read-only tools only; the cart and checkout are absent and forbidden.
    assert_eq!(listed_as(&gateway, &browse), STORE_READ_ONLY);
    let answer = call_as(&gateway, &browse, "manga_search", json!({"query": "naruto"}));
    assert!(answer.get("result").is_some(), "{answer}");
    for tool in ["add_to_cart", "checkout"] {
        expect_error(&call_as(&gateway, &browse, tool, json!({})), -32008, "forbidden");
    }
    assert!(checkout.seen().iter().all(|claims| claims["sub"] != "bob"), "nothing reached checkout for bob");

    // store:buy: the cart and checkout too — the checkout server's, not the demo's copies.
    let mut expected: Vec<&str> = STORE_READ_ONLY.to_vec();
    expected.extend(["add_to_cart", "checkout"]);
    expected.sort();
    assert_eq!(listed_as(&gateway, &buy), expected);
    for demo_copy in ["demo__add_to_cart", "demo__checkout"] {
        expect_error(&call_as(&gateway, &buy, demo_copy, json!({})), -32008, "forbidden");
    }
    let exchanges_before = oauth.exchanges();
    let cart =
        whoami(&call_as(&gateway, &buy, "add_to_cart", json!({"manga_id": "MNG-00000001", "quantity": 2})));
    assert_eq!(cart, json!({"cart_of": "carol", "items": 1}));
    let order = whoami(&call_as(
        &gateway,
        &buy,
        "checkout",
        json!({"shipping_address_id": "ADDR-1", "payment_method_id": "PAY-1"}),
    ));
    assert_eq!(order, json!({"order_for": "carol", "items": 1, "gift_wrap": false}));
    assert_eq!(oauth.exchanges() - exchanges_before, 1, "one exchange for carol's token, then the cache");

    // What the checkout server saw for the shopper: a token issued to it, for carol, with the
    // gateway acting — never the shopper's own token (whose audience is the gateway).
    let for_carol: Vec<Value> =
        checkout.seen().into_iter().filter(|claims| claims["sub"] == "carol").collect();
    let tokens: std::collections::BTreeSet<&str> =
        for_carol.iter().filter_map(|c| c["jti"].as_str()).collect();
    assert_eq!(tokens.len(), 1, "one exchanged token served both calls: {for_carol:?}");
    assert_eq!(for_carol[0]["aud"], "urn:mcp:checkout");
    assert_eq!(for_carol[0]["act"]["sub"], "mcp-gateway");
    assert_eq!(checkout.refused("InvalidAudienceError"), 0, "the shopper's own token was never sent");
    assert!(checkout.seen().iter().all(|claims| claims["aud"] == "urn:mcp:checkout"));

    // No token: 401 pointing at the protected-resource metadata; nothing reaches any server.
    let (status, _) = post_as(&gateway, None, &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    assert_eq!(status, 401);
    let log = gateway.proc.output();
    assert!(!log.contains(SECRET), "the client secret leaked into the log");
    assert!(!log.contains(&buy), "a shopper's token leaked into the log");
}
