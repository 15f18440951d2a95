//! `check-config` runs every check `serve` runs: a file it passes starts, a file `serve`
//! refuses it refuses with the same reason, it ends with a one-line verdict, and `--demo`
//! checks a file as `serve --demo` runs it.

use std::process::Command;

use serde_json::{Value, json};

use crate::common::{Gateway, TempFile, bin, check_config};

/// An OpenAPI document whose only server URL is relative, with a bearer scheme.
fn relative_document() -> TempFile {
    let document = json!({
        "openapi": "3.1.0",
        "info": {"title": "books", "version": "1"},
        "servers": [{"url": "/api"}],
        "components": {"securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearerAuth": []}],
        "paths": {"/books": {"get": {"operationId": "list_books", "tags": ["books"],
            "responses": {"200": {"description": "ok"}}}}}
    });
    TempFile::with("relative-doc.json", document.to_string())
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `serve` with `config`: its stderr once it has exited (it must refuse to start).
fn serve_refuses(config: &TempFile) -> String {
    let output = Command::new(bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--config", config.arg()])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .output()
        .expect("mcp-gateway serve runs");
    assert!(!output.status.success(), "serve started with a file check-config refuses");
    stderr(&output)
}

#[test]
fn an_openapi_target_without_a_server_url_fails_check_config_as_it_fails_serve() {
    let document = relative_document();
    let config = TempFile::with(
        "no-base-url.toml",
        format!("[servers.books]\ntransport = \"openapi\"\nspec = {:?}\n", document.arg()),
    );
    let checked = check_config(&["--config", config.arg()], &[]);
    assert!(!checked.status.success(), "check-config passed a file serve refuses");
    let reason = "has no absolute `servers` URL; set servers.books.base_url";
    assert!(stderr(&checked).contains(reason), "{}", stderr(&checked));
    assert!(serve_refuses(&config).contains(reason));
}

#[test]
fn a_secret_whose_variable_is_unset_fails_check_config_as_it_fails_serve() {
    let document = relative_document();
    let config = TempFile::with(
        "unset-secret.toml",
        format!(
            "[servers.books]\ntransport = \"openapi\"\nspec = {:?}\nbase_url = \"http://127.0.0.1:9/api\"\n\
             [servers.books.security.bearerAuth]\nenv = \"BOOKS_TOKEN_THAT_IS_NOT_SET\"\n",
            document.arg()
        ),
    );
    let checked = check_config(&["--config", config.arg()], &[]);
    assert!(!checked.status.success(), "check-config passed a file serve refuses");
    assert!(stderr(&checked).contains("BOOKS_TOKEN_THAT_IS_NOT_SET"), "{}", stderr(&checked));
    assert!(serve_refuses(&config).contains("BOOKS_TOKEN_THAT_IS_NOT_SET"));
    // With the variable set, it passes, and says so in one line.
    let passed = check_config(&["--config", config.arg()], &[("BOOKS_TOKEN_THAT_IS_NOT_SET", "t0ken")]);
    assert!(passed.status.success(), "{}", stderr(&passed));
    let verdict = stderr(&passed).lines().last().unwrap_or_default().to_string();
    assert_eq!(
        verdict,
        "check-config: ok: 1 server(s) (openapi 1), 1 tool(s) known before start, 0 warning(s)"
    );
    assert!(!String::from_utf8_lossy(&passed.stdout).contains("t0ken"), "a secret was printed");
}

#[test]
fn a_selector_that_selects_nothing_is_a_warning_and_numbers_read_as_written() {
    let document = relative_document();
    let config = TempFile::with(
        "unmatched.toml",
        format!(
            "[servers.books]\ntransport = \"openapi\"\nspec = {:?}\nbase_url = \"http://127.0.0.1:9/api\"\n\
             include = [\"tag:books\", \"tag:bokos\"]\nexclude = [\"operation:delete_book\"]\n",
            document.arg()
        ),
    );
    let checked = check_config(&["--config", config.arg()], &[]);
    assert!(checked.status.success(), "{}", stderr(&checked));
    let text = stderr(&checked);
    assert!(text.contains("warning: servers.books: include: tag:bokos matches no operation"), "{text}");
    assert!(
        text.contains("warning: servers.books: exclude: operation:delete_book matches no operation"),
        "{text}"
    );
    assert!(!text.contains("include: tag:books "), "a selector that matched was reported: {text}");
    assert!(text.ends_with("1 tool(s) known before start, 2 warning(s)\n"), "{text}");
    // The TOML form: the retry budget's ratio as written, not as its f32 widened.
    let toml = String::from_utf8_lossy(&checked.stdout);
    assert!(toml.contains("budget_ratio = 0.2\n"), "{toml}");
    assert!(!toml.contains("0.20000000298023224"), "{toml}");
}

#[test]
fn demo_lets_a_file_name_the_demo_server_in_check_config_and_serve() {
    let config = TempFile::with(
        "names-demo.toml",
        "[endpoints.shop.select]\nservers = [\"demo\"]\n\n[[hooks]]\nname = \"no-cards\"\nphase = \"after\"\n\
         match_servers = [\"demo\"]\nbuiltin = \"redact\"\ndetect = [\"card\"]\n",
    );
    let without = check_config(&["--config", config.arg()], &[]);
    assert!(!without.status.success(), "a file naming an unknown server passed");
    assert!(stderr(&without).contains("demo"), "{}", stderr(&without));
    let with = check_config(&["--json", "--demo", "--config", config.arg()], &[]);
    assert!(with.status.success(), "{}", stderr(&with));
    let shown: Value = serde_json::from_slice(&with.stdout).expect("check-config --json prints JSON");
    assert_eq!(shown["servers"]["demo"]["transport"], "http");
    assert!(stderr(&with).contains("check-config: ok: 1 server(s) (http 1)"), "{}", stderr(&with));
    // serve --demo with the same file starts, and its endpoint serves the demo's tools.
    let gateway =
        Gateway::start_with_args(&std::fs::read_to_string(config.path()).unwrap(), &[], &["--demo"]);
    let response = gateway
        .client
        .post(gateway.url("/mcp/shop"))
        .header("content-type", "application/json")
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string())
        .send()
        .expect("the gateway answers");
    assert_eq!(response.status().as_u16(), 200);
    let listed: Value = response.json().expect("tools/list answers JSON");
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"manga_search"), "{listed}");
}
