//! Child processes for the tests: each killed when its handle drops, its output collected line
//! by line so a failure can show it; free loopback ports; waiting for a condition with a limit
//! that only stops a broken run from hanging.

use std::{
    io::{BufRead, BufReader},
    net::{SocketAddr, TcpListener, TcpStream},
    process::{Child, Command, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU32, Ordering},
    },
    time::{Duration, Instant},
};

use serde_json::Value;

/// A free loopback port for a peer to listen on, handed out once per test process.
///
/// Not a port from `bind(0)`: that one is in the kernel's ephemeral range, where outgoing
/// connections take their local ports, so between its release and the peer's own bind a
/// connection of another test could take it (seen as a peer's "address already in use").
/// Ports come from outside that range (`ip_local_port_range`), in turn from an offset of the
/// process id, each checked free when handed out.
pub fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let (low, span) = ports_outside_the_ephemeral_range();
    let offset = std::process::id() % span;
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (low + (offset + n) % span) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The first port and the size of a range no outgoing connection takes a local port from:
/// below the ephemeral range when it leaves room there (Linux's default 32768–60999), else
/// above it.
fn ports_outside_the_ephemeral_range() -> (u32, u32) {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let mut bounds = range.split_whitespace().filter_map(|n| n.parse::<u32>().ok());
    let (first, last) = (bounds.next().unwrap_or(32768), bounds.next().unwrap_or(60999));
    if first >= 12_000 {
        (10_000, first - 10_000)
    } else if last <= 63_000 {
        (last + 1, 65_535 - last)
    } else {
        (10_000, 20_000)
    }
}

/// Waits until something accepts TCP connections on `port`.
pub fn wait_port(port: u16, what: &str, within: Duration) {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{what} did not start listening on port {port} within {within:?}");
}

/// Polls `condition` until it holds. The limit only stops a broken run from hanging; it is
/// generous on purpose and is never the thing a test checks.
pub fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
    let limit = Instant::now() + Duration::from_secs(60);
    while !condition() {
        assert!(Instant::now() < limit, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A child process killed on drop, whose stdout and stderr lines are collected.
pub struct Proc {
    pub child: Child,
    pub lines: Arc<Mutex<Vec<String>>>,
    pub name: String,
}

impl Proc {
    pub fn spawn(name: &str, mut command: Command) -> Self {
        command.stdout(Stdio::piped()).stderr(Stdio::piped()).stdin(Stdio::null());
        let mut child = command.spawn().unwrap_or_else(|e| panic!("cannot start {name} ({command:?}): {e}"));
        let lines = Arc::new(Mutex::new(Vec::new()));
        for stream in [
            child.stdout.take().map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
            child.stderr.take().map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let lines = lines.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    lines.lock().unwrap().push(line);
                }
            });
        }
        Self { child, lines, name: name.to_string() }
    }

    /// Starts `command` and waits until the process prints a line containing `ready`.
    pub fn spawn_until(name: &str, command: Command, ready: &str) -> Self {
        let mut proc = Self::spawn(name, command);
        proc.wait_line(ready, Duration::from_secs(30));
        proc
    }

    /// Starts `command` and waits until something listens on `port`.
    pub fn spawn_on(name: &str, command: Command, port: u16) -> Self {
        let proc = Self::spawn(name, command);
        wait_port(port, name, Duration::from_secs(30));
        proc
    }

    /// Starts `command` and reads the address from its start-up line's `"listen"` field (the
    /// gateway's, the demo server's and the scripted peers' first JSON line).
    pub fn spawn_listening(name: &str, command: Command) -> (Self, SocketAddr) {
        let mut proc = Self::spawn(name, command);
        let addr = proc.listen_addr();
        (proc, addr)
    }

    /// The `"listen"` field of the process's start-up line.
    pub fn listen_addr(&mut self) -> SocketAddr {
        let line = self.wait_line("\"listen\"", Duration::from_secs(30));
        let v: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("startup line is not JSON ({e}): {line}"));
        v["listen"].as_str().and_then(|l| l.parse().ok()).unwrap_or_else(|| panic!("no address in {line}"))
    }

    /// Waits for an output line containing `needle`; returns it.
    pub fn wait_line(&mut self, needle: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            if let Some(line) = self.lines.lock().unwrap().iter().find(|l| l.contains(needle)) {
                return line.clone();
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "{} exited ({status}) before printing {needle:?}; output:\n{}",
                    self.name,
                    self.output()
                );
            }
            if Instant::now() > deadline {
                panic!(
                    "{} did not print {needle:?} within {within:?}; output:\n{}",
                    self.name,
                    self.output()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn output(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// Sends SIGTERM and waits for exit.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("{} did not exit after SIGTERM", self.name);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the process now and reaps it (what dropping it does, for a process kept in a
    /// struct).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends a signal (`"STOP"`, `"CONT"`, `"TERM"`, …) to this process, by its id.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill").arg(format!("-{signal}")).arg(self.child.id().to_string()).status();
        assert!(
            status.is_ok_and(|s| s.success()),
            "kill -{signal} {} ({}) failed",
            self.child.id(),
            self.name
        );
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A process's peak resident set size (`VmHWM`), in KiB.
pub fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/<pid>/status")
}

/// A loopback listener that accepts and counts the connections it is offered, and answers
/// none (they are held open): the port, and the count.
pub fn counting_listener() -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            seen.fetch_add(1, Ordering::SeqCst);
            held.push(stream);
        }
    });
    (port, count)
}
