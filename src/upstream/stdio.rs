//! stdio: an MCP server run as a child process, JSON-RPC as newline-delimited lines on its
//! stdin and stdout (a [`Connector`]; the connection above restarts it with backoff).
//!
//! Choices a production sidecar needs:
//! - **Environment**: the child does not inherit the gateway's environment (which holds
//!   `MCP_GATEWAY_*` header credentials and AWS settings); it gets only [`INHERITED_ENV`]
//!   plus the server's own `env`, as the official SDK clients do.
//! - **Bounds**: each stdout line is read up to `max_response_bytes` (beyond it the
//!   connection ends with [`ChannelEnd::MessageTooLarge`] and the child is stopped); stderr
//!   lines are cut to [`STDERR_LINE_BYTES`] and at most [`STDERR_LINES_PER_SEC`] per second
//!   reach the log (as `warn` lines with the server's name), the rest are counted in the
//!   next line that gets through.
//! - **No orphans**: the child runs in its own process group, gets `SIGKILL` if the gateway
//!   dies (`PR_SET_PDEATHSIG`, Linux; tied to the spawning thread, a runtime thread that lives
//!   as long as the gateway), and is stopped with `SIGTERM` to its group, then
//!   `SIGKILL` after `stdio_stop_grace_ms`, when the connection is closed (shutdown,
//!   reconnect, stack dropped). After the child exits, whatever it left in its group is
//!   killed. `kill_on_drop` is the last resort.

use std::{
    process::Stdio,
    sync::Arc,
    time::{Duration, Instant},
};

use tokio::{
    io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader},
    process::{Child, ChildStdin, Command},
    sync::{mpsc, watch},
};

use super::channel::{ChannelEnd, ConnectError, Connector, MessageChannel};
use crate::config::StdioCommand;

/// The only variables of the gateway's environment a child inherits.
pub const INHERITED_ENV: &[&str] = &["PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "TMPDIR"];
/// Longest stderr line logged (longer ones are cut, marked with `…`).
pub const STDERR_LINE_BYTES: usize = 1024;
/// Most stderr lines logged per second per server.
pub const STDERR_LINES_PER_SEC: u32 = 20;

/// Settings of one stdio server.
#[derive(Debug, Clone)]
pub struct StdioSettings {
    pub server: Arc<str>,
    pub command: StdioCommand,
    /// Longest stdout line (one JSON-RPC message), in bytes.
    pub max_message_bytes: usize,
    /// Time between `SIGTERM` and `SIGKILL` when the gateway stops the child.
    pub stop_grace: Duration,
}

/// Starts the command once per connection.
pub struct StdioConnector {
    settings: Arc<StdioSettings>,
}

impl StdioConnector {
    pub fn new(settings: StdioSettings) -> Self {
        Self { settings: Arc::new(settings) }
    }
}

impl Connector for StdioConnector {
    fn connect(
        &self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<MessageChannel, ConnectError>> + Send>>
    {
        let settings = self.settings.clone();
        Box::pin(async move { spawn(settings) })
    }

    fn describe(&self) -> String {
        // The program only: arguments may carry tokens, and env values never leave the config.
        format!("stdio:{}", self.settings.command.command)
    }
}

fn spawn(settings: Arc<StdioSettings>) -> Result<MessageChannel, ConnectError> {
    let spec = &settings.command;
    let mut command = Command::new(&spec.command);
    command.args(&spec.args).env_clear();
    for name in INHERITED_ENV {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    command
        .envs(&spec.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    #[cfg(target_os = "linux")]
    // SAFETY: `prctl` is async-signal-safe and touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = command
        .spawn()
        .map_err(|e| ConnectError::Unreachable(format!("cannot start {}: {e}", spec.command)))?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(ConnectError::Unreachable("child process without pipes".into()));
    };
    let pid = child.id();
    tracing::info!(server = %settings.server, pid, command = %spec.command, "stdio server process started");

    let (outgoing, outgoing_rx) = mpsc::channel::<String>(64);
    let (incoming_tx, incoming) = mpsc::channel::<String>(64);
    let (ended_tx, ended) = watch::channel(None);
    tokio::spawn(forward_stderr(stderr, settings.server.clone()));
    tokio::spawn(run(settings, child, pid, stdin, stdout, outgoing_rx, incoming_tx, ended_tx));
    Ok(MessageChannel { outgoing, incoming, ended })
}

/// How the child's session ended, from the owner task's point of view.
enum Stop {
    /// It exited on its own.
    Exited(std::process::ExitStatus),
    /// The gateway closed the channel.
    ByGateway,
    /// Its stdout misbehaved (too long a line, read error): stop it.
    Stdout(ChannelEnd),
}

/// Owns the child: pumps stdin and stdout, and stops it when the channel closes.
#[allow(clippy::too_many_arguments)]
async fn run(
    settings: Arc<StdioSettings>,
    mut child: Child,
    pid: Option<u32>,
    stdin: ChildStdin,
    stdout: tokio::process::ChildStdout,
    outgoing: mpsc::Receiver<String>,
    incoming: mpsc::Sender<String>,
    ended: watch::Sender<Option<ChannelEnd>>,
) {
    let mut writer = tokio::spawn(write_stdin(stdin, outgoing));
    let mut reader = tokio::spawn(read_stdout(stdout, incoming.clone(), settings.max_message_bytes));
    let stop = tokio::select! {
        status = child.wait() => match status {
            Ok(status) => Stop::Exited(status),
            Err(e) => Stop::Stdout(ChannelEnd::Broken(format!("waiting for the process: {e}"))),
        },
        read = &mut reader => match read {
            Ok(ReadEnd::Failed(end)) => Stop::Stdout(end),
            Ok(ReadEnd::Unread) => Stop::ByGateway,
            // End of stdout: the process is exiting (or closed it); its status says why.
            _ => match tokio::time::timeout(settings.stop_grace, child.wait()).await {
                Ok(Ok(status)) => Stop::Exited(status),
                _ => Stop::Stdout(ChannelEnd::Closed("the process closed its stdout".into())),
            },
        },
        written = &mut writer => match written {
            // The pipe broke: the process is going away; its status says why.
            Ok(false) => match tokio::time::timeout(settings.stop_grace, child.wait()).await {
                Ok(Ok(status)) => Stop::Exited(status),
                _ => Stop::Stdout(ChannelEnd::Broken("the process closed its stdin".into())),
            },
            _ => Stop::ByGateway,
        },
        _ = incoming.closed() => Stop::ByGateway,
    };
    writer.abort();
    let end = match stop {
        Stop::Exited(status) => {
            // Let the answers it wrote before exiting through first.
            let _ = tokio::time::timeout(Duration::from_secs(1), &mut reader).await;
            ChannelEnd::Closed(format!("the process exited ({status})"))
        }
        Stop::ByGateway => {
            terminate(&mut child, pid, settings.stop_grace, &settings.server).await;
            ChannelEnd::Closed("stopped by the gateway".into())
        }
        Stop::Stdout(end) => {
            terminate(&mut child, pid, settings.stop_grace, &settings.server).await;
            end
        }
    };
    reader.abort();
    // Whatever the child left running in its group goes with it.
    signal_group(pid, Signal::Kill);
    tracing::info!(server = %settings.server, pid, reason = ?end, "stdio server process ended");
    let _ = ended.send(Some(end));
    drop(incoming);
}

#[derive(Clone, Copy)]
enum Signal {
    Term,
    Kill,
}

/// Signals the child's process group (it leads its own group).
fn signal_group(pid: Option<u32>, signal: Signal) {
    #[cfg(unix)]
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()).filter(|p| *p > 0) {
        let signal = match signal {
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
        };
        // SAFETY: plain syscall; a group that no longer exists gives ESRCH, ignored.
        unsafe {
            libc::kill(-pid, signal);
        }
    }
    #[cfg(not(unix))]
    let _ = (pid, signal);
}

/// `SIGTERM`, then `SIGKILL` after `grace`; reaps the child.
async fn terminate(child: &mut Child, pid: Option<u32>, grace: Duration, server: &str) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    signal_group(pid, Signal::Term);
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        tracing::warn!(
            server,
            pid,
            grace_ms = grace.as_millis() as u64,
            "stdio server ignored SIGTERM; killing it"
        );
        signal_group(pid, Signal::Kill);
        let _ = child.kill().await;
    }
}

/// Writes each message as one line; ends when every sender is gone (true) or the pipe
/// breaks (false).
async fn write_stdin(mut stdin: ChildStdin, mut outgoing: mpsc::Receiver<String>) -> bool {
    while let Some(message) = outgoing.recv().await {
        let mut line = message.into_bytes();
        // A message is one line: JSON never needs a raw newline, so one inside is refused
        // here rather than let it split the frame.
        if line.contains(&b'\n') {
            line.retain(|b| *b != b'\n');
        }
        line.push(b'\n');
        if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
            return false;
        }
    }
    true
}

/// Why reading stdout stopped.
#[derive(Debug, PartialEq, Eq)]
enum ReadEnd {
    /// End of stdout.
    Eof,
    /// Nobody reads the messages any more (the gateway closed the channel).
    Unread,
    /// The stream must be dropped (a line over the limit, a read error).
    Failed(ChannelEnd),
}

/// Reads newline-delimited messages, each at most `limit` bytes.
async fn read_stdout(
    stdout: impl AsyncRead + Unpin,
    incoming: mpsc::Sender<String>,
    limit: usize,
) -> ReadEnd {
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut line: Vec<u8> = Vec::new();
    loop {
        let buffer = match reader.fill_buf().await {
            Ok(buffer) => buffer,
            Err(e) => return ReadEnd::Failed(ChannelEnd::Broken(format!("reading stdout: {e}"))),
        };
        if buffer.is_empty() {
            // A partial last line is not a message.
            return ReadEnd::Eof;
        }
        let (chunk, complete) = match buffer.iter().position(|b| *b == b'\n') {
            Some(at) => (&buffer[..at], true),
            None => (buffer, false),
        };
        if line.len() + chunk.len() > limit {
            return ReadEnd::Failed(ChannelEnd::MessageTooLarge { limit });
        }
        line.extend_from_slice(chunk);
        let consumed = chunk.len() + usize::from(complete);
        reader.consume(consumed);
        if !complete {
            continue;
        }
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if !line.iter().all(u8::is_ascii_whitespace) {
            let text = match String::from_utf8(std::mem::take(&mut line)) {
                Ok(text) => text,
                Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
            };
            if incoming.send(text).await.is_err() {
                return ReadEnd::Unread;
            }
        }
        line.clear();
        if line.capacity() > 1024 * 1024 {
            line = Vec::new();
        }
    }
}

/// Logs the child's stderr: each line cut to [`STDERR_LINE_BYTES`], at most
/// [`STDERR_LINES_PER_SEC`] a second (the others counted and reported).
async fn forward_stderr(stderr: impl AsyncRead + Unpin, server: Arc<str>) {
    let mut reader = BufReader::with_capacity(8 * 1024, stderr);
    let mut line: Vec<u8> = Vec::new();
    let mut cut = false;
    let mut window = Instant::now();
    let mut logged_in_window = 0u32;
    let mut suppressed = 0u64;
    loop {
        let buffer = match reader.fill_buf().await {
            Ok(buffer) if !buffer.is_empty() => buffer,
            _ => break,
        };
        let (chunk, complete) = match buffer.iter().position(|b| *b == b'\n') {
            Some(at) => (&buffer[..at], true),
            None => (buffer, false),
        };
        let room = STDERR_LINE_BYTES.saturating_sub(line.len());
        if chunk.len() > room {
            cut = true;
        }
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let consumed = chunk.len() + usize::from(complete);
        reader.consume(consumed);
        if !complete {
            continue;
        }
        if window.elapsed() >= Duration::from_secs(1) {
            window = Instant::now();
            logged_in_window = 0;
        }
        if logged_in_window < STDERR_LINES_PER_SEC {
            logged_in_window += 1;
            let mut text = String::from_utf8_lossy(&line).trim_end().to_string();
            if cut {
                text.push('…');
            }
            tracing::warn!(server = %server, stderr = %text, suppressed_before = suppressed, "upstream stderr");
            suppressed = 0;
        } else {
            suppressed += 1;
        }
        line.clear();
        cut = false;
    }
    if suppressed > 0 {
        tracing::warn!(server = %server, suppressed, "upstream stderr lines suppressed by the rate limit");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_framed_and_bounded() {
        let (tx, mut rx) = mpsc::channel(8);
        let input: &[u8] = b"{\"a\":1}\r\n\n  \n{\"b\":2}\npartial";
        assert_eq!(read_stdout(input, tx, 64).await, ReadEnd::Eof);
        assert_eq!(rx.recv().await.as_deref(), Some("{\"a\":1}"));
        assert_eq!(rx.recv().await.as_deref(), Some("{\"b\":2}"));
        assert!(rx.recv().await.is_none(), "a partial last line is not a message");

        let (tx, _rx) = mpsc::channel(8);
        let long = format!("{}\n", "x".repeat(100));
        assert_eq!(
            read_stdout(long.as_bytes(), tx, 64).await,
            ReadEnd::Failed(ChannelEnd::MessageTooLarge { limit: 64 })
        );
    }
}
