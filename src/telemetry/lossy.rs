//! The log writer: lines go into a bounded in-memory buffer that a writer thread empties in
//! batches, and when the buffer is full new lines are dropped and counted rather than the request
//! waiting (a stuck log pipe never stalls a call).
//!
//! The hot path pays one short mutex hold and a copy into a shared byte buffer per line, nothing
//! more: no allocation and no thread wake-up per line. The writer thread is never woken by a
//! request: it wakes by itself, every [`BATCH_INTERVAL`] while lines keep coming, writing each
//! batch with one `write`, and less often while there are none (the pause doubles up to
//! [`IDLE_INTERVAL`]: ten wake-ups a second when idle). A futex wake, an allocation and a
//! `write` per line profile at about 13 µs of CPU per call, and at low rates a woken thread
//! competes with the request for the CPU before its answer is written. The
//! price: a line reaches stdout up to `IDLE_INTERVAL` after it was logged; at exit everything
//! queued is written.
//!
//! Why not `tracing_appender::non_blocking`: its bounded channel allocates and touches every
//! slot of its 128 000-line buffer up front (about 4 MiB resident before the first line), and it
//! wakes its worker per line. This buffer grows with the backlog, up to the same bound, and a
//! large one is released once written, so an idle gateway holds no log buffer.
//!
//! The audit trail ([`crate::audit`]) uses the same writer with a byte bound
//! ([`writer_bounded`]) and [`LossyWriter::push_line`], which tells each line that gets in how
//! many were lost since the previous one (queue full, or the sink failing a write), so a gap is
//! visible in the output itself.

use std::{
    io::Write,
    sync::{
        Arc, Condvar, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    thread::JoinHandle,
    time::Duration,
};

use tracing_subscriber::fmt::MakeWriter;

/// How long the writer thread lets lines accumulate between two writes while busy.
pub const BATCH_INTERVAL: Duration = Duration::from_millis(5);

/// The longest pause of the writer thread (reached while no line comes).
pub const IDLE_INTERVAL: Duration = Duration::from_millis(100);

/// A written batch buffer larger than this is freed rather than kept for the next batch.
const KEPT_BUFFER_BYTES: usize = 256 * 1024;

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    capacity: usize,
    /// Most bytes queued at once (`inbound.log_queue_bytes`): lines are bounded in length only
    /// by their fields' bound, so a line count alone does not bound memory.
    max_bytes: usize,
    dropped: AtomicU64,
    dropped_bytes: AtomicU64,
}

#[derive(Default)]
struct State {
    /// Queued lines, back to back.
    bytes: Vec<u8>,
    /// How many lines `bytes` holds.
    lines: usize,
    closed: bool,
    /// Lines lost since the last line queued through [`LossyWriter::push_line`].
    unreported: u64,
}

impl Shared {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `len` more bytes may be queued now (counts the line as lost when not).
    fn admits(&self, state: &mut State, len: usize) -> bool {
        let fits = !state.closed
            && state.lines < self.capacity
            && state.bytes.len().saturating_add(len) <= self.max_bytes;
        if !fits {
            state.unreported += 1;
            self.dropped.fetch_add(1, Ordering::Relaxed);
            self.dropped_bytes.fetch_add(len as u64, Ordering::Relaxed);
        }
        fits
    }

    /// Counts `lines` lost after they were queued (the sink failed to take them).
    fn lost(&self, lines: u64) {
        self.state().unreported += lines;
        self.dropped.fetch_add(lines, Ordering::Relaxed);
    }
}

/// Hands each formatted event to the writer thread (`MakeWriter` for the fmt layer).
#[derive(Clone)]
pub struct LossyWriter(Arc<Shared>);

/// Stops the writer thread after it has written every queued line (drop at exit).
pub struct Guard {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// Lines dropped so far because the queue was full.
#[derive(Clone)]
pub struct DroppedLines(Arc<Shared>);

impl DroppedLines {
    pub fn get(&self) -> u64 {
        self.0.dropped.load(Ordering::Relaxed)
    }

    /// Bytes of the lines dropped so far.
    pub fn bytes(&self) -> u64 {
        self.0.dropped_bytes.load(Ordering::Relaxed)
    }
}

/// A writer to `out` keeping at most `capacity` lines waiting.
pub fn writer<W: Write + Send + 'static>(out: W, capacity: usize) -> (LossyWriter, DroppedLines, Guard) {
    writer_bounded(out, "log-writer", capacity, usize::MAX)
}

/// A writer to `out` (its thread named `name`) keeping at most `max_lines` lines and
/// `max_bytes` bytes waiting.
pub fn writer_bounded<W: Write + Send + 'static>(
    out: W,
    name: &str,
    max_lines: usize,
    max_bytes: usize,
) -> (LossyWriter, DroppedLines, Guard) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State::default()),
        wake: Condvar::new(),
        capacity: max_lines.max(1),
        max_bytes: max_bytes.max(1),
        dropped: AtomicU64::new(0),
        dropped_bytes: AtomicU64::new(0),
    });
    let drain = shared.clone();
    let thread = std::thread::Builder::new()
        .name(name.into())
        .stack_size(64 * 1024)
        .spawn(move || run(&drain, out))
        .ok();
    (LossyWriter(shared.clone()), DroppedLines(shared.clone()), Guard { shared, thread })
}

fn run<W: Write>(shared: &Shared, mut out: W) {
    let mut batch = Vec::new();
    let mut pause = BATCH_INTERVAL;
    loop {
        let closed = {
            let mut state = shared.state();
            std::mem::swap(&mut state.bytes, &mut batch);
            state.lines = 0;
            state.closed
        };
        if batch.is_empty() {
            // Nothing came: pause longer, up to IDLE_INTERVAL.
            pause = (pause * 2).min(IDLE_INTERVAL);
        } else {
            pause = BATCH_INTERVAL;
            // A failing sink loses lines (counted); it must not stop the writer.
            if out.write_all(&batch).and_then(|()| out.flush()).is_err() {
                shared.lost(batch.iter().filter(|&&b| b == b'\n').count() as u64);
            }
            batch.clear();
            if batch.capacity() > KEPT_BUFFER_BYTES {
                batch = Vec::new();
            }
        }
        if closed {
            return;
        }
        // Only closing wakes the writer early.
        let state = shared.state();
        if !state.closed {
            drop(shared.wake.wait_timeout(state, pause));
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.shared.state().closed = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One event's writer: queues what it is given as one line.
pub struct Line<'a>(&'a Shared);

impl LossyWriter {
    /// Queues one line: `body`, then whatever `end` appends, told how many lines were lost
    /// since the previous line queued here (`end` must finish the line, newline included, in
    /// at most [`END_RESERVE`] bytes). Returns whether the line was queued.
    pub fn push_line(&self, body: &[u8], end: impl FnOnce(&mut Vec<u8>, u64)) -> bool {
        let mut state = self.0.state();
        if !self.0.admits(&mut state, body.len() + END_RESERVE) {
            return false;
        }
        let lost = std::mem::take(&mut state.unreported);
        state.bytes.extend_from_slice(body);
        end(&mut state.bytes, lost);
        state.lines += 1;
        true
    }
}

/// Room kept for the end [`LossyWriter::push_line`] appends.
pub const END_RESERVE: usize = 48;

impl Write for Line<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut state = self.0.state();
        if !self.0.admits(&mut state, buf.len()) {
            return Ok(buf.len());
        }
        state.bytes.extend_from_slice(buf);
        state.lines += 1;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for LossyWriter {
    type Writer = Line<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        Line(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_are_written_in_order_and_flushed_at_exit() {
        let sink = Sink::default();
        let (writer, dropped, guard) = super::writer(sink.clone(), 1000);
        for i in 0..100 {
            writer.make_writer().write_all(format!("{i}\n").as_bytes()).unwrap();
        }
        drop(guard);
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        let expected: String = (0..100).map(|i| format!("{i}\n")).collect();
        assert_eq!(text, expected);
        assert_eq!(dropped.get(), 0);
    }

    #[test]
    fn a_full_queue_drops_and_counts_instead_of_waiting() {
        /// Blocks until released: a stuck log pipe.
        struct Stuck(Arc<(Mutex<bool>, Condvar)>);
        impl Write for Stuck {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                let (open, cv) = &*self.0;
                let mut open = open.lock().unwrap();
                while !*open {
                    open = cv.wait(open).unwrap();
                }
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        let (writer, dropped, guard) = super::writer(Stuck(gate.clone()), 10);
        for _ in 0..1_000 {
            writer.make_writer().write_all(b"line\n").unwrap();
        }
        // At most the queue (10) and one batch held by the stuck writer were kept.
        assert!(dropped.get() >= 1_000 - 20, "{}", dropped.get());
        *gate.0.lock().unwrap() = true;
        gate.1.notify_all();
        drop(guard);
    }

    #[test]
    fn the_queue_is_bounded_in_bytes_whatever_the_line_count() {
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        struct Stuck(Arc<(Mutex<bool>, Condvar)>);
        impl Write for Stuck {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                let (open, cv) = &*self.0;
                let mut open = open.lock().unwrap();
                while !*open {
                    open = cv.wait(open).unwrap();
                }
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let (writer, dropped, guard) =
            super::writer_bounded(Stuck(gate.clone()), "test", 1_000_000, 64 * 1024);
        let line = vec![b'x'; 1024];
        for _ in 0..1_000 {
            writer.make_writer().write_all(&line).unwrap();
        }
        // The queue (64 KiB) and one batch taken by the stuck writer: at most 128 lines kept.
        assert!(dropped.get() >= 1_000 - 128, "{}", dropped.get());
        assert_eq!(dropped.bytes(), dropped.get() * 1024);
        assert!(writer.0.state().bytes.len() <= 64 * 1024);
        *gate.0.lock().unwrap() = true;
        gate.1.notify_all();
        drop(guard);
    }
}
