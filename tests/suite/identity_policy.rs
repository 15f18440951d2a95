//! Caller identity and tool policy, end to end with real processes: a real OAuth server
//! (oauth2-mock-server, `tests/peers/identity/oauth_server.mjs`) issues RS256 tokens over HTTP, the
//! built gateway checks them against the server's JWKS, and the demo store server counts
//! what reached it. A hostile JWKS endpoint in front of the OAuth server's
//! (`tests/peers/scripted/hostile_jwks.py`: fails, hangs until released, or answers an
//! oversized set) shows that forged key ids cannot multiply reads after a failure, that a
//! hanging read holds up no token for a known key, and that an oversized set is refused while
//! the last good keys keep working — each by the reads the endpoint saw. The store example
//! (`config/store-identity.toml`, whose checkout server needs token exchange) is run by
//! `tests/upstream_credentials.rs`.

use crate::common;

use std::{path::PathBuf, process::Command, time::Duration};

use crate::common::{Demo, Gateway, Proc, expect_error, metric, peers_dir, python, wait_for};
use serde_json::{Value, json};

const READ_ONLY: [&str; 4] = ["inventory_check", "manga_recommendations", "manga_search", "price_lookup"];

/// The OAuth server process and its issuer URL (also used by `ownership.rs`).
pub(crate) struct OAuth {
    _proc: Proc,
    pub(crate) issuer: String,
    client: reqwest::blocking::Client,
}

impl OAuth {
    pub(crate) fn start() -> Self {
        let script = peers_dir().join("identity/oauth_server.mjs");
        let mut command = Command::new("node");
        command.arg(&script).current_dir(peers_dir());
        let mut proc = Proc::spawn("oauth_server.mjs", command);
        let line = proc.wait_line("\"issuer\"", Duration::from_secs(30));
        let started: Value = serde_json::from_str(&line).unwrap();
        let issuer = started["issuer"].as_str().unwrap().to_string();
        let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
        Self { _proc: proc, issuer, client }
    }

    pub(crate) fn jwks_url(&self) -> String {
        format!("{}/jwks", self.issuer)
    }

    /// A token from the token endpoint (client_credentials) with these form fields.
    fn token_with(&self, fields: &[(&str, &str)]) -> String {
        let mut form = vec![("grant_type", "client_credentials")];
        form.extend_from_slice(fields);
        let body: String = form
            .iter()
            .map(|(k, v)| format!("{k}={}", v.replace('%', "%25").replace(' ', "%20").replace('&', "%26")))
            .collect::<Vec<_>>()
            .join("&");
        let response = self
            .client
            .post(format!("{}/token", self.issuer))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .expect("the OAuth server answers");
        assert_eq!(response.status(), 200, "token endpoint refused {fields:?}");
        let answer: Value = response.json().unwrap();
        answer["access_token"].as_str().expect("an access token").to_string()
    }

    /// A token for `subject` with `scope`, for the audience `mcp-gateway`.
    pub(crate) fn token(&self, subject: &str, scope: &str) -> String {
        self.token_with(&[("client_id", subject), ("scope", scope), ("aud", "mcp-gateway")])
    }

    fn jwks_reads(&self) -> u64 {
        let stats: Value = self.client.get(format!("{}/_stats", self.issuer)).send().unwrap().json().unwrap();
        stats["jwks"].as_u64().unwrap()
    }
}

/// A temporary policy file, replaced atomically (write + rename) like a ConfigMap.
struct PolicyFile(PathBuf);

impl PolicyFile {
    fn new(text: &str) -> Self {
        let file = Self(common::temp_path("policy.cedar"));
        file.replace(text);
        file
    }

    fn replace(&self, text: &str) {
        let staged = self.0.with_extension("staged");
        std::fs::write(&staged, text).unwrap();
        std::fs::rename(&staged, &self.0).unwrap();
    }
}

impl Drop for PolicyFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

const STORE_POLICY_FOR_TESTS: &str = r#"
@id("browse")
permit(principal, action == Action::"call", resource)
when { resource.readOnly && (principal.scopes.contains("store:browse") || principal.scopes.contains("store:buy")) };

@id("buy")
permit(principal, action == Action::"call", resource)
when { principal.scopes.contains("store:buy") };
"#;

fn jwt_config(oauth: &OAuth, demo: &Demo, policy: Option<&PolicyFile>) -> String {
    let policy = policy
        .map(|p| format!("[policy]\nfile = {:?}\nreload_secs = 1\n", p.0.to_str().unwrap()))
        .unwrap_or_default();
    // `/metrics` is closed on the MCP listener once `[auth]` is on: the tests read it with the
    // admin token.
    format!(
        r#"
[metrics]
main_listener = "admin"
[auth]
mode = "jwt"
issuer = "{issuer}"
audience = "mcp-gateway"
jwks_url = "{jwks}"
jwks_min_refetch_secs = 0
scopes_supported = ["store:browse", "store:buy"]

{policy}
[servers.store]
transport = "http"
url = "{url}"
"#,
        issuer = oauth.issuer,
        jwks = oauth.jwks_url(),
        url = demo.url(),
    )
}

/// POSTs a JSON-RPC message with a bearer token (or none); status, headers, body.
fn post(gw: &Gateway, token: Option<&str>, message: &Value) -> (u16, reqwest::header::HeaderMap, Value) {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", a.as_str())).collect();
    let (status, headers, body) = gw.post_raw(message.to_string(), &headers);
    let body = if body.is_empty() { Value::Null } else { serde_json::from_str(&body).unwrap() };
    (status, headers, body)
}

fn list(gw: &Gateway, token: &str) -> Vec<String> {
    let (status, _, body) =
        post(gw, Some(token), &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
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

fn call(gw: &Gateway, token: &str, tool: &str, arguments: Value) -> Value {
    let message = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": tool, "arguments": arguments}});
    let (status, _, body) = post(gw, Some(token), &message);
    assert_eq!(status, 200, "{body}");
    body
}

fn get(gw: &Gateway, token: Option<&str>, path: &str) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut request = gw.client.get(gw.url(path));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.json().unwrap_or(Value::Null))
}

fn upstream_calls(demo: &Demo) -> u64 {
    demo.stats()["calls"].as_u64().unwrap()
}

#[test]
fn missing_and_invalid_tokens_get_401_and_never_reach_the_upstream() {
    let oauth = OAuth::start();
    let demo = Demo::http();
    let gw = Gateway::start(&jwt_config(&oauth, &demo, None), &[]);
    let message = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "manga_search", "arguments": {"query": "x"}}});

    // No token: 401, a challenge naming the metadata, no error code (RFC 6750 §3.1).
    let (status, headers, body) = post(&gw, None, &message);
    assert_eq!(status, 401, "{body}");
    let challenge = headers["www-authenticate"].to_str().unwrap();
    let metadata_url = format!("http://{}/.well-known/oauth-protected-resource", gw.addr);
    assert_eq!(challenge, format!("Bearer resource_metadata=\"{metadata_url}\""));
    assert_eq!(body["error"]["data"]["category"], "unauthenticated", "{body}");
    assert_eq!(body["error"]["code"], -32009);

    // The metadata document (RFC 9728) names the issuer as the authorization server.
    let prm: Value = gw.client.get(&metadata_url).send().unwrap().json().unwrap();
    assert_eq!(prm["resource"], format!("http://{}/mcp", gw.addr));
    assert_eq!(prm["authorization_servers"], json!([oauth.issuer]));
    assert_eq!(prm["bearer_methods_supported"], json!(["header"]));
    assert_eq!(prm["scopes_supported"], json!(["store:browse", "store:buy"]));

    let wrong_audience =
        oauth.token_with(&[("client_id", "mallory"), ("scope", "store:buy"), ("aud", "another-service")]);
    let expired = oauth.token_with(&[
        ("client_id", "mallory"),
        ("scope", "store:buy"),
        ("aud", "mcp-gateway"),
        ("expires_in", "-3600"),
    ]);
    let wrong_issuer = oauth.token_with(&[
        ("client_id", "mallory"),
        ("scope", "store:buy"),
        ("aud", "mcp-gateway"),
        ("iss_override", "https://evil.example"),
    ]);
    let good = oauth.token("alice", "store:buy");
    let mut tampered: Vec<char> = good.chars().collect();
    let last = tampered.len() - 3;
    tampered[last] = if tampered[last] == 'A' { 'B' } else { 'A' };
    let tampered: String = tampered.into_iter().collect();
    for (token, reason) in [
        (wrong_audience.as_str(), "wrong_audience"),
        (expired.as_str(), "expired"),
        (wrong_issuer.as_str(), "wrong_issuer"),
        (tampered.as_str(), "bad_signature"),
        ("not-a-jwt", "malformed"),
    ] {
        let (status, headers, body) = post(&gw, Some(token), &message);
        assert_eq!(status, 401, "{reason}: {body}");
        let challenge = headers["www-authenticate"].to_str().unwrap();
        assert!(challenge.contains("error=\"invalid_token\""), "{reason}: {challenge}");
        assert_eq!(body["error"]["data"]["reason"], reason, "{body}");
        // GET endpoints are guarded the same way.
        assert_eq!(get(&gw, Some(token), "/tools?format=openai").0, 401, "{reason}");
        assert_eq!(get(&gw, Some(token), "/capabilities").0, 401, "{reason}");
    }
    assert_eq!(upstream_calls(&demo), 0, "no refused request reached the upstream");
    let metrics = gw.metrics();
    assert!(metric(&metrics, "mcp_gateway_auth_rejections_total", &["reason=\"expired\""]) >= 1.0);

    // The valid token is served (no policy: every tool).
    let answer = call(&gw, &good, "manga_search", json!({"query": "naruto"}));
    assert!(answer.get("result").is_some(), "{answer}");
    assert_eq!(upstream_calls(&demo), 1);
}

#[test]
fn scopes_decide_what_is_listed_exported_and_callable() {
    let oauth = OAuth::start();
    let demo = Demo::http();
    let policy = PolicyFile::new(STORE_POLICY_FOR_TESTS);
    let gw = Gateway::start(&jwt_config(&oauth, &demo, Some(&policy)), &[]);
    let browse = oauth.token("bob", "store:browse");
    let buy = oauth.token("carol", "store:browse store:buy");
    let nothing = oauth.token("dave", "profile");

    assert_eq!(list(&gw, &browse), READ_ONLY);
    let mut all: Vec<String> = READ_ONLY.iter().map(|s| s.to_string()).collect();
    all.extend(["add_to_cart".to_string(), "checkout".to_string()]);
    all.sort();
    assert_eq!(list(&gw, &buy), all);
    assert!(list(&gw, &nothing).is_empty());

    // The exports and /capabilities show the same tools.
    let (status, _, openai) = get(&gw, Some(&browse), "/tools?format=openai");
    assert_eq!(status, 200);
    let exported = openai.to_string();
    assert!(exported.contains("manga_search"), "{exported}");
    assert!(!exported.contains("add_to_cart") && !exported.contains("checkout"), "{exported}");
    // `tools export --url … --token-file …` exports what that caller may call.
    let token_file = policy.0.with_extension("token");
    std::fs::write(&token_file, &browse).unwrap();
    let output = Command::new(common::BIN)
        .args(["tools", "export", "--format", "anthropic", "--url", &gw.url(""), "--token-file"])
        .arg(&token_file)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&token_file);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let cli_export = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(cli_export.contains("manga_search"), "{cli_export}");
    assert!(!cli_export.contains("add_to_cart") && !cli_export.contains("checkout"), "{cli_export}");
    let (_, _, caps) = get(&gw, Some(&browse), "/capabilities");
    assert_eq!(caps["tools"]["total"], 4, "{caps}");
    let (_, _, caps) = get(&gw, Some(&buy), "/capabilities");
    assert_eq!(caps["tools"]["total"], 6, "{caps}");

    // Calls: read-only allowed; the others forbidden, and never sent upstream.
    let before = upstream_calls(&demo);
    let answer = call(&gw, &browse, "price_lookup", json!({"manga_id": "MNG-00000001"}));
    assert!(answer.get("result").is_some(), "{answer}");
    assert_eq!(upstream_calls(&demo), before + 1);
    for tool in ["add_to_cart", "checkout"] {
        let answer = call(&gw, &browse, tool, json!({}));
        let data = expect_error(&answer, -32008, "forbidden");
        assert_eq!(data["retryable"], false);
        assert_eq!(data["tool"], tool);
    }
    assert_eq!(upstream_calls(&demo), before + 1, "denied calls reached the upstream");

    // Inside a batch: each item decided alone.
    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "manga_search", "arguments": {"query": "one piece"}}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "checkout", "arguments": {"shipping_address_id": "a", "payment_method_id": "b"}}},
    ]);
    let (status, _, answers) = post(&gw, Some(&browse), &batch);
    assert_eq!(status, 200);
    assert!(answers[0].get("result").is_some(), "{answers}");
    expect_error(&answers[1], -32008, "forbidden");
    assert_eq!(upstream_calls(&demo), before + 2);

    // The buyer may call them.
    let answer = call(&gw, &buy, "add_to_cart", json!({"manga_id": "MNG-00000001"}));
    assert!(answer.get("result").is_some(), "{answer}");

    // An unknown name stays unknown_tool (it exists for nobody).
    let answer = call(&gw, &browse, "no_such_tool", json!({}));
    assert_eq!(answer["error"]["data"]["category"], "unknown_tool", "{answer}");

    // Decisions are counted by rule, server and outcome — never by subject.
    let metrics = gw.metrics();
    assert!(
        metric(
            &metrics,
            "mcp_gateway_policy_decisions_total",
            &["rule=\"default_deny\"", "server=\"store\"", "outcome=\"deny\""]
        ) >= 3.0,
        "{metrics}"
    );
    assert!(
        metric(&metrics, "mcp_gateway_policy_decisions_total", &["rule=\"browse\"", "outcome=\"allow\""])
            >= 2.0
    );
    assert!(
        metric(&metrics, "mcp_gateway_policy_decisions_total", &["rule=\"buy\"", "outcome=\"allow\""]) >= 1.0
    );
    assert!(!metrics.contains("bob") && !metrics.contains("carol"), "a subject leaked into the metrics");
}

#[test]
fn policy_reloads_without_restart_and_a_broken_file_keeps_the_old_policy() {
    let oauth = OAuth::start();
    let demo = Demo::http();
    let policy = PolicyFile::new(STORE_POLICY_FOR_TESTS);
    let gw = Gateway::start(&jwt_config(&oauth, &demo, Some(&policy)), &[]);
    let browse = oauth.token("bob", "store:browse");
    assert_eq!(list(&gw, &browse), READ_ONLY);
    // Denied, and that decision is cached: the reload below must still change it.
    let answer = call(&gw, &browse, "add_to_cart", json!({"manga_id": "MNG-00000001"}));
    expect_error(&answer, -32008, "forbidden");

    // A new rule: browsers may now add to cart (by name pattern).
    policy.replace(&format!(
        "{STORE_POLICY_FOR_TESTS}\n@id(\"browse-cart\")\npermit(principal, action, resource)\nwhen {{ principal.scopes.contains(\"store:browse\") && resource.name like \"add_to_*\" }};\n"
    ));
    wait_for("the reloaded policy to list add_to_cart", || {
        list(&gw, &browse).contains(&"add_to_cart".to_string())
    });
    let answer = call(&gw, &browse, "add_to_cart", json!({"manga_id": "MNG-00000001"}));
    assert!(answer.get("result").is_some(), "{answer}");

    // A broken file: refused with its location, the previous policy stays in force.
    policy.replace("permit(principal, action, resource)\nwhen { principal.scopes.contains(\"x\") \n");
    wait_for("the invalid policy to be reported", || gw.proc.output().contains("policy file invalid"));
    let line = gw.proc.output().lines().find(|l| l.contains("policy file invalid")).unwrap().to_string();
    assert!(line.contains("line "), "no location in {line}");
    assert!(line.contains("column "), "no location in {line}");
    assert!(list(&gw, &browse).contains(&"add_to_cart".to_string()), "the last good policy is in force");
    let metrics = gw.metrics();
    assert!(metric(&metrics, "mcp_gateway_policy_reloads_total", &["outcome=\"invalid\""]) >= 1.0);
    assert!(metric(&metrics, "mcp_gateway_policy_reloads_total", &["outcome=\"loaded\""]) >= 1.0);

    // Fixed again: the new file applies.
    policy.replace(STORE_POLICY_FOR_TESTS);
    wait_for("the fixed policy to apply", || !list(&gw, &browse).contains(&"add_to_cart".to_string()));
    let answer = call(&gw, &browse, "add_to_cart", json!({"manga_id": "MNG-00000001"}));
    expect_error(&answer, -32008, "forbidden");
}

#[test]
fn a_repeated_token_is_not_checked_again_and_an_unknown_key_rereads_the_jwks() {
    let oauth = OAuth::start();
    let demo = Demo::http();
    let gw = Gateway::start(&jwt_config(&oauth, &demo, None), &[]);
    let reads_at_start = oauth.jwks_reads();
    assert!(reads_at_start >= 1, "the JWKS is read at start");
    let token = oauth.token("alice", "store:browse");
    for _ in 0..5 {
        assert_eq!(list(&gw, &token).len(), 6);
    }
    assert_eq!(oauth.jwks_reads(), reads_at_start, "known keys: no JWKS read per token");
    // A token naming a kid the set lacks: the set is read again (rate-limited; here 0 s).
    let header = r#"{"alg":"RS256","kid":"rotated-key","typ":"JWT"}"#;
    let forged = format!("{}.{}", b64(header), good_tail(&token));
    let (status, _, body) =
        post(&gw, Some(&forged), &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    assert_eq!(status, 401);
    assert_eq!(body["error"]["data"]["reason"], "unknown_key", "{body}");
    assert_eq!(oauth.jwks_reads(), reads_at_start + 1, "an unknown kid re-reads the key set");
}

/// `hostile_jwks.py`: the OAuth server's JWKS behind an endpoint that fails, hangs or answers
/// an oversized set on command, and counts the reads it saw.
struct HostileJwks {
    _proc: Proc,
    jwks: String,
    control: String,
    client: reqwest::blocking::Client,
}

impl HostileJwks {
    fn start(oauth: &OAuth, mode: &str) -> Self {
        let mut command = Command::new(python());
        command.arg(peers_dir().join("scripted/hostile_jwks.py")).args([
            "--upstream",
            &oauth.jwks_url(),
            "--mode",
            mode,
        ]);
        let mut proc = Proc::spawn("hostile_jwks.py", command);
        let line = proc.wait_line("READY ", Duration::from_secs(30));
        let urls: Value = serde_json::from_str(line.trim_start_matches("READY ")).unwrap();
        let url = |k: &str| urls[k].as_str().unwrap().to_string();
        let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
        Self { jwks: url("jwks"), control: url("control"), _proc: proc, client }
    }

    fn post(&self, path: &str) {
        let response = self.client.post(format!("{}/{path}", self.control)).send().unwrap();
        assert_eq!(response.status(), 200, "{path}");
    }

    fn mode(&self, mode: &str) {
        self.post(&format!("mode/{mode}"));
    }

    fn release(&self) {
        self.post("release");
    }

    fn stats(&self) -> Value {
        self.client.get(format!("{}/stats", self.control)).send().unwrap().json().unwrap()
    }

    /// JWKS requests seen, whatever they were answered.
    fn requests(&self) -> u64 {
        self.stats()["requests"].as_u64().unwrap()
    }
}

/// The gateway in jwt mode with its keys from `jwks` and these extra `[auth]` settings.
fn hostile_config(oauth: &OAuth, jwks: &HostileJwks, demo: &Demo, settings: &str) -> String {
    format!(
        r#"
[auth]
mode = "jwt"
issuer = "{issuer}"
audience = "mcp-gateway"
jwks_url = "{jwks}"
{settings}

[servers.store]
transport = "http"
url = "{url}"
"#,
        issuer = oauth.issuer,
        jwks = jwks.jwks,
        url = demo.url(),
    )
}

/// A token that names key `kid` (absent from the issuer's set) over a real token's payload.
fn forged(kid: &str, real: &str) -> String {
    let header = format!(r#"{{"alg":"RS256","kid":"{kid}","typ":"JWT"}}"#);
    format!("{}.{}", b64(&header), good_tail(real))
}

const LIST: &str = r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}"#;

fn refusal_reason(gw: &Gateway, token: &str) -> (u16, Value) {
    let (status, _, body) = post(gw, Some(token), &serde_json::from_str(LIST).unwrap());
    (status, body["error"]["data"]["reason"].clone())
}

#[test]
fn after_a_failed_jwks_read_forged_key_ids_cannot_make_the_gateway_read_it_again() {
    let oauth = OAuth::start();
    let demo = Demo::http();
    let jwks = HostileJwks::start(&oauth, "fail");
    let gw = Gateway::start(&hostile_config(&oauth, &jwks, &demo, "jwks_min_refetch_secs = 3600"), &[]);
    assert_eq!(jwks.requests(), 1, "the read at start (it failed)");
    let real = oauth.token("mallory", "store:buy");

    // 30 forged key ids, 6 callers at once: the failed read at start began the spacing.
    let reasons: Vec<(u16, Value)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..6)
            .map(|worker| {
                let (gw, real) = (&gw, &real);
                scope.spawn(move || {
                    (0..5)
                        .map(|i| refusal_reason(gw, &forged(&format!("forged-{worker}-{i}"), real)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().unwrap()).collect()
    });
    assert_eq!(reasons.len(), 30);
    for (status, reason) in &reasons {
        assert_eq!(*status, 401);
        assert_eq!(reason, "jwks_unavailable", "no key set was ever read");
    }
    assert!(
        jwks.requests() <= 2,
        "30 forged key ids made {} JWKS reads after the failed one",
        jwks.requests() - 1
    );
}

#[test]
fn a_hanging_jwks_read_never_holds_up_a_token_for_a_known_key() {
    let oauth = OAuth::start();
    let demo = Demo::http();
    let jwks = HostileJwks::start(&oauth, "good");
    // Reads may start at any time (0 s spacing), the set is stale after 1 s, and a read is
    // given far longer than this test, so the endpoint alone decides when the hang ends.
    let gw = Gateway::start(
        &hostile_config(
            &oauth,
            &jwks,
            &demo,
            "jwks_min_refetch_secs = 0\njwks_refresh_secs = 1\njwks_timeout_ms = 600000",
        ),
        &[],
    );
    assert_eq!(jwks.requests(), 1, "the read at start");
    let first = oauth.token("alice", "store:browse");
    assert_eq!(list(&gw, &first).len(), 6, "the key set read at start verifies alice's token");
    // Let the set grow older than jwks_refresh_secs: a valid token may now ask for a refresh,
    // but must not wait for one.
    std::thread::sleep(Duration::from_millis(1_100));

    jwks.mode("hang");
    std::thread::scope(|scope| {
        let gw = &gw;
        let forged_call = scope.spawn(move || refusal_reason(gw, &forged("rotated-key", &first)));
        wait_for("the JWKS endpoint to hold the gateway's read", || jwks.stats()["holding"] == 1);

        // A token the gateway has never seen, signed by a key it knows: answered from the
        // current set while the read is still held open.
        let second = oauth.token("bob", "store:browse");
        assert_eq!(list(gw, &second).len(), 6);
        let stats = jwks.stats();
        assert_eq!(stats["holding"], 1, "the read is still held open: {stats}");
        assert_eq!(stats["abandoned"], 0, "{stats}");
        assert_eq!(stats["requests"], 2, "one read in flight, no second one: {stats}");

        jwks.release();
        let (status, reason) = forged_call.join().unwrap();
        assert_eq!(status, 401);
        assert_eq!(reason, "unknown_key", "the forged kid waited for the read, then was refused");
    });
    assert_eq!(jwks.requests(), 2);
}

#[test]
fn an_oversized_jwks_is_refused_and_the_last_good_keys_keep_working() {
    let oauth = OAuth::start();
    let demo = Demo::http();
    let jwks = HostileJwks::start(&oauth, "good");
    // The default jwks_max_bytes (256 KiB); the hostile set is 1 MiB.
    let gw = Gateway::start(&hostile_config(&oauth, &jwks, &demo, "jwks_min_refetch_secs = 0"), &[]);
    let first = oauth.token("alice", "store:browse");
    assert_eq!(list(&gw, &first).len(), 6);

    jwks.mode("huge");
    let (status, reason) = refusal_reason(&gw, &forged("rotated-key", &first));
    assert_eq!((status, reason), (401, json!("unknown_key")));
    let stats = jwks.stats();
    assert_eq!(stats["by_mode"]["huge"], 1, "the forged kid read the set once: {stats}");

    // A token never seen before, signed by a key of the last good set: still verified.
    let second = oauth.token("bob", "store:browse");
    let (status, _, body) = post(&gw, Some(&second), &serde_json::from_str(LIST).unwrap());
    assert_eq!(status, 200, "the last good keys were dropped: {body}");
    assert_eq!(jwks.stats()["by_mode"]["huge"], 1, "a known key needed no read");
    wait_for("the oversized JWKS to be reported", || gw.proc.output().contains("jwks_max_bytes"));
    let line = gw.proc.output().lines().find(|l| l.contains("jwks_max_bytes")).unwrap().to_string();
    assert!(line.contains("larger than jwks_max_bytes (262144 bytes)"), "{line}");
    assert!(line.contains("the previous key set stays"), "{line}");
}

/// Base64url without padding (test-side, to build a header naming an unknown key).
fn b64(text: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bytes = text.as_bytes();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// The payload and signature of a real token.
fn good_tail(token: &str) -> &str {
    token.split_once('.').unwrap().1
}

#[test]
fn header_identity_is_refused_on_an_open_listener_unless_trusted() {
    let file = common::TempFile::new("header.toml");
    let path = file.path();
    let write = |extra: &str| {
        std::fs::write(
            path,
            format!("listen = \"0.0.0.0:0\"\nallow_non_loopback = true\n[auth]\nmode = \"header\"\n{extra}"),
        )
        .unwrap()
    };
    write("");
    let output = Command::new(common::BIN)
        .args(["check-config", "--config", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!output.status.success(), "header mode on 0.0.0.0 without trust was accepted");
    let text = String::from_utf8_lossy(&output.stderr).to_string() + &String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("trust_identity_header"), "{text}");
    write("trust_identity_header = true\n");
    let output = Command::new(common::BIN)
        .args(["check-config", "--config", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

#[test]
fn header_identity_on_loopback_feeds_the_policy() {
    let demo = Demo::http();
    let policy = PolicyFile::new(
        r#"@id("ops-group") permit(principal in Group::"ops", action, resource);
@id("readers") permit(principal, action, resource) when { resource.readOnly };"#,
    );
    let config = format!(
        "[auth]\nmode = \"header\"\nsubject_header = \"x-caller-subject\"\ngroups_header = \"x-caller-groups\"\n[policy]\nfile = {:?}\n[servers.store]\ntransport = \"http\"\nurl = \"{}\"\n",
        policy.0.to_str().unwrap(),
        demo.url()
    );
    let gw = Gateway::start(&config, &[]);
    let message = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "add_to_cart", "arguments": {"manga_id": "MNG-00000001"}}});
    let (status, headers, _) = gw.post_raw(message.to_string(), &[]);
    assert_eq!(status, 401, "no subject header");
    assert!(headers.contains_key("www-authenticate"));
    let (status, _, body) =
        gw.post_raw(message.to_string(), &[("x-caller-subject", "erin"), ("x-caller-groups", "staff")]);
    assert_eq!(status, 200);
    expect_error(&serde_json::from_str(&body).unwrap(), -32008, "forbidden");
    let (status, _, body) =
        gw.post_raw(message.to_string(), &[("x-caller-subject", "erin"), ("x-caller-groups", "staff, ops")]);
    assert_eq!(status, 200);
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert!(answer.get("result").is_some(), "{answer}");
}

/// `check-config` loads the policy file as `serve` and a reload do: a missing or unparsable
/// file fails it with the reason (a rollout checked with it would otherwise fail at start).
#[test]
fn check_config_refuses_a_policy_file_serve_would_refuse() {
    let missing = common::temp_path("no-such-policy.cedar");
    let missing_file = missing.display().to_string();
    let output = common::check_config(&[], &[("MCP_GATEWAY_POLICY__FILE", missing_file.as_str())]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "a missing policy file passed: {stderr}");
    assert!(stderr.contains("no-such-policy.cedar"), "{stderr}");

    let broken = PolicyFile::new("permit(principal, action, resource) when { principal. };");
    let broken_file = broken.0.display().to_string();
    let output = common::check_config(&[], &[("MCP_GATEWAY_POLICY__FILE", broken_file.as_str())]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "an unparsable policy passed: {stderr}");
    assert!(stderr.contains("line 1"), "the reason names the place: {stderr}");

    broken.replace("permit(principal, action, resource);");
    let output = common::check_config(&[], &[("MCP_GATEWAY_POLICY__FILE", broken_file.as_str())]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}
