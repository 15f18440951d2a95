//! A gateway whose stdout nobody reads (a stuck log shipper) keeps answering: the log writer
//! drops lines instead of blocking request threads, and counts what it dropped.

mod common;

use std::{
    io::{BufRead, BufReader, Write},
    net::SocketAddr,
    process::{Command, Stdio},
    time::Duration,
};

use common::*;
use serde_json::{Value, json};

#[test]
fn the_gateway_keeps_answering_when_its_stdout_pipe_is_full() {
    let path = std::env::temp_dir().join(format!("stuck-log-{}-{}.toml", std::process::id(), free_port()));
    std::fs::File::create(&path)
        .unwrap()
        .write_all(b"log_level = \"info\"\n[inbound]\nmax_batch_items = 1000\n")
        .unwrap();
    let _config = tempfile_path::TempPath(path.clone());
    let mut child = Command::new(BIN)
        .args(["serve", "--config", path.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    // Read up to the start-up line, then never again: the pipe (64 KiB) fills and stays full.
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let addr: SocketAddr = loop {
        line.clear();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "gateway exited before listening");
        if let Ok(v) = serde_json::from_str::<Value>(&line)
            && let Some(listen) = v["listen"].as_str()
        {
            break listen.parse().unwrap();
        }
    };
    let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    let url = format!("http://{addr}/mcp");
    // Each batch logs 1 000 call lines: 200 batches are well past the pipe and the writer's
    // 128 000-line buffer.
    let batch: Vec<Value> = (0..1000)
        .map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "no_such_tool", "arguments": {}}}))
        .collect();
    let body = Value::Array(batch).to_string();
    for round in 0..200 {
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
    assert!(dropped > 0.0, "lines beyond the buffer are dropped and counted:\n{metrics}");
    let _ = child.kill();
    let _ = child.wait();
    drop(stdout);
}
