//! JSON log lines, formatted straight into the log buffer.
//!
//! The output is byte for byte what tracing-subscriber's JSON formatter writes with
//! `flatten_event(true)` and no span fields (a test holds both side by side):
//! `{"timestamp":"…Z","level":"INFO","message":"…",<fields in order>,"target":"…"}`.
//!
//! Why not that formatter: every call writes a line, and it cost about 5% of the gateway's CPU
//! per call at full load (perf profile). It renders through `fmt::Write` adaptors — each
//! of serde_json's small writes checked as UTF-8 again and appended to a per-thread `String`
//! — and formats the timestamp through `Display`. Here one thread-local byte buffer takes
//! serde_json's output directly, and the date is computed with integer arithmetic.

use std::{cell::RefCell, fmt::Write as _, io::Write as _, time::SystemTime};

use tracing::{
    Event, Subscriber,
    field::{Field, Visit},
};
use tracing_subscriber::{fmt::MakeWriter, layer::Context};

/// The longest field value written whole unless configured otherwise
/// (`inbound.log_max_field_bytes`).
pub const DEFAULT_MAX_FIELD_BYTES: usize = 4096;

/// The layer writing one JSON line per event to `writer`.
pub struct JsonLines<W> {
    writer: W,
    /// Longest field value written whole: callers choose request ids, JSON-RPC ids and tool
    /// names, and a line must not carry a megabyte of one into the log queue.
    max_field_bytes: usize,
}

impl<W> JsonLines<W> {
    pub fn new(writer: W) -> Self {
        Self { writer, max_field_bytes: DEFAULT_MAX_FIELD_BYTES }
    }

    /// Cuts every field value longer than `max` bytes (at a character boundary), marking it
    /// `…[truncated N bytes]`.
    pub fn with_max_field_bytes(mut self, max: usize) -> Self {
        self.max_field_bytes = max.max(1);
        self
    }
}

thread_local! {
    /// The line being formatted, and scratch space for `Debug` values.
    static BUFFERS: RefCell<(Vec<u8>, String)> = const { RefCell::new((Vec::new(), String::new())) };
}

/// A buffer grown past this by one huge event is freed rather than kept for the thread.
const KEPT_BUFFER_BYTES: usize = 64 * 1024;

impl<S, W> tracing_subscriber::Layer<S> for JsonLines<W>
where
    S: Subscriber,
    W: for<'a> MakeWriter<'a> + 'static,
{
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let write = |line: &mut Vec<u8>, scratch: &mut String| {
            line.clear();
            format_line(line, scratch, event, SystemTime::now(), self.max_field_bytes);
            let _ = self.writer.make_writer().write_all(line);
            if line.capacity() > KEPT_BUFFER_BYTES {
                *line = Vec::new();
            }
        };
        // A re-entrant event (logged while formatting one) gets buffers of its own.
        let reused = BUFFERS.try_with(|buffers| match buffers.try_borrow_mut() {
            Ok(mut buffers) => {
                let (line, scratch) = &mut *buffers;
                write(line, scratch);
                true
            }
            Err(_) => false,
        });
        if reused != Ok(true) {
            write(&mut Vec::new(), &mut String::new());
        }
    }
}

/// Formats `event` logged at `now` as one JSON line, newline included.
fn format_line(line: &mut Vec<u8>, scratch: &mut String, event: &Event<'_>, now: SystemTime, max: usize) {
    let metadata = event.metadata();
    line.extend_from_slice(b"{\"timestamp\":\"");
    timestamp(line, now);
    line.extend_from_slice(b"\",\"level\":\"");
    line.extend_from_slice(metadata.level().as_str().as_bytes());
    line.push(b'"');
    event.record(&mut Fields { line, scratch, max });
    line.extend_from_slice(b",\"target\":");
    string(line, metadata.target());
    line.extend_from_slice(b"}\n");
}

/// Appends each field as `,"name":value`.
struct Fields<'a> {
    line: &'a mut Vec<u8>,
    scratch: &'a mut String,
    /// Longest value written whole.
    max: usize,
}

impl Fields<'_> {
    fn name(&mut self, field: &Field) {
        self.line.push(b',');
        string(self.line, field.name());
        self.line.push(b':');
    }

    fn number(&mut self, field: &Field, value: impl serde::Serialize) {
        self.name(field);
        let _ = serde_json::to_writer(&mut *self.line, &value);
    }
}

/// 128-bit integers are left to `record_debug`: tracing-subscriber writes them as strings.
impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.name(field);
        bounded_string(self.line, value, self.max);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.scratch.clear();
        let _ = write!(self.scratch, "{value:?}");
        self.name(field);
        bounded_string(self.line, self.scratch, self.max);
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.scratch.clear();
        let _ = write!(self.scratch, "{value}");
        self.name(field);
        bounded_string(self.line, self.scratch, self.max);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.number(field, value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.number(field, value);
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.number(field, value);
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.number(field, value);
    }
}

/// [`string`] of at most `max` bytes of `value` (cut at a character boundary), followed inside
/// the string by `…[truncated N bytes]` when something was cut.
fn bounded_string(line: &mut Vec<u8>, value: &str, max: usize) {
    if value.len() <= max {
        return string(line, value);
    }
    let mut cut = max;
    while !value.is_char_boundary(cut) {
        cut -= 1;
    }
    string(line, &value[..cut]);
    line.pop(); // the closing quote
    let _ = write!(line, "\u{2026}[truncated {} bytes]\"", value.len() - cut);
}

/// A JSON string, escaped as serde_json escapes it. Names and most values need no escape:
/// they are copied in one piece, and only the rest goes through serde_json's escaper.
fn string(line: &mut Vec<u8>, value: &str) {
    if value.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        line.reserve(value.len() + 2);
        line.push(b'"');
        line.extend_from_slice(value.as_bytes());
        line.push(b'"');
        return;
    }
    let _ = serde_json::to_writer(line, value);
}

/// `YYYY-MM-DDTHH:MM:SS.ffffff` in UTC (the `Z` follows), as tracing-subscriber prints it.
/// Digits are written directly: `write!` through `fmt` cost more than the rest of the line.
pub(crate) fn timestamp(line: &mut Vec<u8>, now: SystemTime) {
    let since_epoch = now.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let secs = since_epoch.as_secs();
    let (year, month, day) = civil_from_days((secs / 86_400) as i64);
    let of_day = secs % 86_400;
    if !(0..=9999).contains(&year) {
        // Outside four digits (a clock set absurdly): the general path, still valid text.
        let _ = write!(line, "{year:04}-{month:02}-{day:02}T");
    } else {
        digits(line, year as u64, 4);
        line.push(b'-');
        digits(line, u64::from(month), 2);
        line.push(b'-');
        digits(line, u64::from(day), 2);
        line.push(b'T');
    }
    digits(line, of_day / 3600, 2);
    line.push(b':');
    digits(line, of_day / 60 % 60, 2);
    line.push(b':');
    digits(line, of_day % 60, 2);
    line.push(b'.');
    digits(line, u64::from(since_epoch.subsec_micros()), 6);
    line.push(b'Z');
}

/// `value` in exactly `width` decimal digits, zero-padded (`value` is below `10^width`).
fn digits(line: &mut Vec<u8>, mut value: u64, width: usize) {
    let start = line.len();
    line.resize(start + width, b'0');
    for slot in line[start..].iter_mut().rev() {
        *slot = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use std::{
        io,
        sync::{Arc, Mutex},
    };

    use tracing_subscriber::prelude::*;

    use super::*;

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Sink {
        type Writer = Sink;
        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    #[derive(Debug)]
    struct Odd {
        _text: &'static str,
    }

    fn emit_everything() {
        let error = io::Error::other("disk \"full\"");
        let missing: Option<&str> = None;
        tracing::info!(
            target: "mcp_gateway::call",
            request_id = %"aa82\u{1}43",
            trace_id = missing,
            tool = "price_lookup",
            odd = "back\\slash, del \u{7f}, \"quoted\", ワンピース",
            latency_us = 465u64,
            delta = -3i64,
            big = 1u128 << 100,
            ratio = 0.25f64,
            nan = f64::NAN,
            ok = true,
            debug = ?Odd { _text: "ワンピース\n" },
            error = &error as &(dyn std::error::Error + 'static),
            "tools/call"
        );
        tracing::warn!(server = "demo", "upstream \"demo\" is down: {}\t{}", 503, "retrying");
        tracing::error!("no fields at all");
    }

    /// Everything but the timestamp, which the two formatters take at different instants.
    fn without_timestamps(text: &str) -> Vec<String> {
        text.lines()
            .map(|line| {
                let end = line.find("\",\"level\"").expect("a timestamp first");
                let stamp = &line["{\"timestamp\":\"".len()..end];
                assert_eq!(stamp.len(), "2026-11-23T20:38:33.273190Z".len(), "{line}");
                assert!(stamp.ends_with('Z'), "{line}");
                line[end..].to_string()
            })
            .collect()
    }

    #[test]
    fn lines_are_what_tracing_subscribers_json_formatter_writes() {
        let ours = Sink::default();
        let theirs = Sink::default();
        let subscriber = tracing_subscriber::registry().with(JsonLines::new(ours.clone())).with(
            tracing_subscriber::fmt::layer()
                .json()
                .flatten_event(true)
                .with_current_span(false)
                .with_span_list(false)
                .with_writer(theirs.clone()),
        );
        tracing::subscriber::with_default(subscriber, emit_everything);
        let ours = String::from_utf8(ours.0.lock().unwrap().clone()).unwrap();
        let theirs = String::from_utf8(theirs.0.lock().unwrap().clone()).unwrap();
        assert_eq!(
            without_timestamps(&ours),
            without_timestamps(&theirs),
            "\nours:   {ours}\ntheirs: {theirs}"
        );
        for line in ours.lines() {
            serde_json::from_str::<serde_json::Value>(line).expect("each line is JSON");
        }
    }

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        let at = |secs: u64, micros: u32| {
            let mut line = Vec::new();
            let when = SystemTime::UNIX_EPOCH + std::time::Duration::new(secs, micros * 1000);
            timestamp(&mut line, when);
            String::from_utf8(line).unwrap()
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(at(951_782_400, 7), "2000-02-29T00:00:00.000007Z"); // a leap day of a century
        assert_eq!(at(1_795_466_313, 273_190), "2026-11-23T20:38:33.273190Z");
        assert_eq!(at(4_107_542_399, 999_999), "2100-02-28T23:59:59.999999Z"); // 2100 is not leap
        assert_eq!(at(253_402_300_799, 999_999), "9999-12-31T23:59:59.999999Z");
        assert_eq!(at(253_402_300_800, 10), "10000-01-01T00:00:00.000010Z"); // past four digits
    }
}
