//! The gateway's stdout as a pipe: a gateway whose stdout nobody reads (a stuck log shipper)
//! keeps answering (the log writer drops lines instead of blocking request threads, and
//! counts what it dropped), and `--log-format text` writes no colour codes into a pipe.

use std::time::Duration;

use crate::common::*;
use serde_json::{Value, json};

#[test]
fn the_gateway_keeps_answering_when_its_stdout_pipe_is_full() {
    // Read up to the start-up line, then never again: the pipe (64 KiB) fills and stays full.
    let gw = UnreadGateway::start(
        "log_level = \"info\"\n[inbound]\nmax_batch_items = 1000\nlog_queue_bytes = 1048576\n",
        &[],
    );
    let addr = gw.addr;
    let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    let url = format!("http://{addr}/mcp");
    // Each batch logs 1 000 call lines of ~300 bytes: 20 batches (~6 MB) are well past the
    // pipe and the writer's queue (1 MiB here; its line-count bound is a unit test's).
    let batch: Vec<Value> = (0..1000)
        .map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "no_such_tool", "arguments": {}}}))
        .collect();
    let body = Value::Array(batch).to_string();
    for round in 0..20 {
        let answer = client
            .post(&url)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .unwrap_or_else(|e| panic!("batch {round} got no answer (log writer blocked?): {e}"));
        assert_eq!(answer.status(), 200);
        let answers: Value = answer.json().unwrap();
        assert_eq!(answers.as_array().map(Vec::len), Some(1000));
    }
    let metrics = client.get(format!("http://{addr}/metrics")).send().unwrap().text().unwrap();
    let dropped = metric(&metrics, "mcp_gateway_log_lines_dropped_total", &[]);
    // The pipe and 1 MiB of queue hold a few thousand lines: most of the 20 000 are dropped
    // and counted (a queue that grew without its byte bound would drop none).
    assert!(dropped >= 10_000.0, "lines beyond the buffer are dropped and counted:\n{metrics}");
}

#[test]
fn text_logs_written_to_a_pipe_carry_no_colour_codes() {
    let config = TempFile::new("text-logs.toml");
    std::fs::write(config.path(), "log_level = \"debug\"\n").unwrap();
    let mut command = std::process::Command::new(BIN);
    command.args(["serve", "--demo", "--log-format", "text", "--listen", "127.0.0.1:0", "--config"]);
    command.arg(config.path());
    let mut gateway = Proc::spawn("mcp-gateway (text logs)", command);
    // The start-up line names the address it listens on; by then several lines were written.
    gateway.wait_line("listen", Duration::from_secs(60));
    let output = gateway.output();
    assert!(output.lines().count() > 1, "{output}");
    assert!(!output.contains('\u{1b}'), "ANSI escape codes in piped text logs:\n{output:?}");
}
