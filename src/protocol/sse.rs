//! Incremental Server-Sent Events framing (the `text/event-stream` answers of streamable HTTP
//! and the deprecated HTTP+SSE transport). Bytes go in as they arrive; whole events come out.
//!
//! Bounded and linear, because an upstream is not trusted: a line longer than the limit, or an
//! event whose `data` grows past it, is an error at the byte that crosses the limit (the
//! caller then drops the stream), and each byte is scanned for a line end once — the decoder
//! keeps the offset up to which its buffer is known to hold no line end, and removes consumed
//! lines once per chunk, not once per line.
//!
//! Resumable streams (SEP-1699): the decoder also keeps what a reader needs to reconnect —
//! the id of the last event dispatched ([`Decoder::last_event_id`], updated even by an event
//! with no data, like the "priming" event servers send first) and the last `retry:` value
//! ([`Decoder::retry_ms`]), both carried over to the next connection's decoder by the reader.
//!
//! Kept as our own code rather than a crate: the maintained SSE parsers we looked at
//! (`eventsource-stream`, `sse-stream`) take a byte stream and buffer a line or an event
//! without any size limit, so bounding memory would need the same byte counting around them
//! that this ~100-line decoder does itself.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The `event:` field; `None` means the default type, `message`.
    pub event: Option<String>,
    pub data: String,
    pub id: Option<String>,
}

/// A line or an event's `data` exceeded the decoder's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge {
    pub limit: usize,
}

/// Accumulates bytes and yields complete events (WHATWG EventSource parsing rules).
#[derive(Debug)]
pub struct Decoder {
    buffer: Vec<u8>,
    /// `buffer[..scanned]` holds no line end (or only a trailing CR awaiting its LF).
    scanned: usize,
    /// Longest line, and largest `data` of one event, in bytes.
    limit: usize,
    event: Option<String>,
    data: String,
    has_data: bool,
    /// The event id buffer (`id:` fields so far; it persists across events).
    id: Option<String>,
    /// The id of the last event dispatched (or ended by a blank line without data).
    last_event_id: Option<String>,
    /// The last valid `retry:` field, in milliseconds.
    retry_ms: Option<u64>,
}

impl Default for Decoder {
    /// Without a limit (for trusted input, e.g. tests).
    fn default() -> Self {
        Self::with_limit(usize::MAX)
    }
}

impl Decoder {
    /// A decoder refusing lines and event data over `limit` bytes.
    pub fn with_limit(limit: usize) -> Self {
        Self {
            buffer: Vec::new(),
            scanned: 0,
            limit,
            event: None,
            data: String::new(),
            has_data: false,
            id: None,
            last_event_id: None,
            retry_ms: None,
        }
    }

    /// The id of the last complete event (WHATWG "last event ID"): what a reconnection sends
    /// as `Last-Event-ID`. An event without data (a priming event) still sets it.
    pub fn last_event_id(&self) -> Option<&str> {
        self.last_event_id.as_deref()
    }

    /// The reconnection time the stream asked for with its last `retry:` field.
    pub fn retry_ms(&self) -> Option<u64> {
        self.retry_ms
    }

    /// Feeds a chunk; returns the events it completed, or [`TooLarge`].
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<Event>, TooLarge> {
        // A chunk that only lengthens an over-long line is refused before it is stored.
        let over = self.buffer.len().saturating_add(chunk.len()) > self.limit.saturating_add(1);
        if over && !chunk.iter().any(|b| *b == b'\n' || *b == b'\r') {
            return Err(TooLarge { limit: self.limit });
        }
        self.reserve(chunk.len());
        self.buffer.extend_from_slice(chunk);
        let mut events = Vec::new();
        let mut start = 0;
        loop {
            let found = self.buffer[self.scanned..].iter().position(|b| *b == b'\n' || *b == b'\r');
            let Some(offset) = found else {
                self.scanned = self.buffer.len();
                break;
            };
            let end = self.scanned + offset;
            // A CR may be followed by LF; wait for the next byte to know.
            let skip = if self.buffer[end] == b'\r' {
                match self.buffer.get(end + 1) {
                    Some(b'\n') => 2,
                    Some(_) => 1,
                    None => {
                        self.scanned = end;
                        break;
                    }
                }
            } else {
                1
            };
            if end - start > self.limit {
                return Err(TooLarge { limit: self.limit });
            }
            let line = String::from_utf8_lossy(&self.buffer[start..end]).into_owned();
            if let Some(event) = self.line(&line)? {
                events.push(event);
            }
            start = end + skip;
            self.scanned = start;
        }
        if start > 0 {
            self.buffer.drain(..start);
            self.scanned -= start;
        }
        if self.buffer.len() > self.limit.saturating_add(1) {
            return Err(TooLarge { limit: self.limit });
        }
        Ok(events)
    }

    /// Past 64 KiB, grows the buffer to the limit at once instead of doubling: untouched
    /// capacity costs address space only, while each doubling would leave the allocator
    /// holding the smaller copies (measured: a capped 100 MB line took 4× the cap in RSS).
    fn reserve(&mut self, more: usize) {
        let needed = self.buffer.len().saturating_add(more);
        if needed > self.buffer.capacity() && needed > 64 * 1024 && self.limit < usize::MAX / 2 {
            let target = self.limit.saturating_add(2).max(needed);
            self.buffer.reserve_exact(target - self.buffer.len());
        }
    }

    fn line(&mut self, line: &str) -> Result<Option<Event>, TooLarge> {
        if line.is_empty() {
            if self.id.is_some() {
                self.last_event_id.clone_from(&self.id);
            }
            if !self.has_data {
                self.event = None;
                return Ok(None);
            }
            self.has_data = false;
            return Ok(Some(Event {
                event: self.event.take(),
                data: std::mem::take(&mut self.data),
                id: self.id.clone(),
            }));
        }
        if line.starts_with(':') {
            return Ok(None);
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = Some(value.to_string()),
            "data" => {
                if self.data.len().saturating_add(value.len()).saturating_add(1) > self.limit {
                    return Err(TooLarge { limit: self.limit });
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            // An id with NUL is ignored (WHATWG); an empty one clears it (nothing to resume from).
            "id" if !value.contains('\0') => self.id = Some(value.to_string()),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry_ms = value.parse().ok();
            }
            _ => {}
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_and_line_endings() {
        let mut d = Decoder::default();
        assert!(d.feed(b"event: message\r\nda").unwrap().is_empty());
        assert!(d.feed(b"ta: {\"a\":1}\r").unwrap().is_empty());
        let events = d.feed(b"\n\r\n: comment\n\ndata: x\ndata: y\n\n").unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].event.as_deref(), Some("message"));
        assert_eq!(events[0].data, "{\"a\":1}");
        assert_eq!(events[1].data, "x\ny");
        // A lone CR ends a line too.
        let events = d.feed(b"data: z\r\rdata: w\n\n").unwrap();
        assert_eq!(events.iter().map(|e| e.data.as_str()).collect::<Vec<_>>(), ["z", "w"]);
    }

    #[test]
    fn endpoint_events_of_the_legacy_sse_transport() {
        let mut d = Decoder::default();
        let events = d.feed(b"event: endpoint\ndata: /message?sessionId=abc\n\n").unwrap();
        assert_eq!(events[0].event.as_deref(), Some("endpoint"));
        assert_eq!(events[0].data, "/message?sessionId=abc");
    }

    #[test]
    fn a_line_or_an_event_over_the_limit_is_refused_as_it_arrives() {
        let mut d = Decoder::with_limit(64);
        assert!(d.feed(&[b'a'; 40]).is_ok());
        assert_eq!(d.feed(&[b'a'; 40]), Err(TooLarge { limit: 64 }), "an unterminated line");
        let mut d = Decoder::with_limit(64);
        assert!(d.feed(b"data: 0123456789012345678901234567890123456789\n").is_ok());
        let over = d.feed(b"data: 0123456789012345678901234567890123456789\n");
        assert_eq!(over, Err(TooLarge { limit: 64 }), "data of one event accumulates");
        let mut d = Decoder::with_limit(64);
        for _ in 0..1000 {
            let events = d.feed(b"data: 0123456789012345678901234567890123456789\n\n").unwrap();
            assert_eq!(events.len(), 1, "separate events are each within the limit");
        }
    }

    #[test]
    fn a_priming_event_sets_the_last_event_id_and_the_retry_time() {
        let mut d = Decoder::default();
        assert_eq!((d.last_event_id(), d.retry_ms()), (None, None));
        // The id counts only once its event is complete.
        assert!(d.feed(b"id: event-1\nretry: 500\n").unwrap().is_empty());
        assert_eq!((d.last_event_id(), d.retry_ms()), (None, Some(500)));
        let events = d.feed(b"\n").unwrap();
        assert!(events.is_empty(), "no data: nothing dispatched");
        assert_eq!(d.last_event_id(), Some("event-1"));
        // Invalid retry values are ignored; the id persists into later events.
        let events = d.feed(b"retry: soon\ndata: x\n\n").unwrap();
        assert_eq!(events[0].id.as_deref(), Some("event-1"));
        assert_eq!(d.retry_ms(), Some(500));
        d.feed(b"id: 7\ndata: \n\n").unwrap();
        assert_eq!(d.last_event_id(), Some("7"));
    }

    #[test]
    fn a_long_line_in_small_chunks_is_scanned_once() {
        let mut d = Decoder::default();
        d.feed(b"data: ").unwrap();
        for _ in 0..10_000 {
            d.feed(&[b'x'; 100]).unwrap();
            assert_eq!(d.scanned, d.buffer.len(), "the scan offset follows the buffer");
        }
        let events = d.feed(b"\n\n").unwrap();
        assert_eq!(events[0].data.len(), 1_000_000);
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        /// Bytes that look like event streams often enough to reach every field.
        fn stream_bytes() -> impl Strategy<Value = Vec<u8>> {
            let piece = prop_oneof![
                Just(b"data: ".to_vec()),
                Just(b"event: x".to_vec()),
                Just(b"id: 7".to_vec()),
                Just(b"retry: 10".to_vec()),
                Just(b":c".to_vec()),
                Just(b"\n".to_vec()),
                Just(b"\r".to_vec()),
                Just(b"\r\n".to_vec()),
                prop::collection::vec(any::<u8>(), 0..40),
            ];
            prop::collection::vec(piece, 0..40).prop_map(|pieces| pieces.concat())
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

            /// Any bytes, cut anywhere: no panic, memory bounded by the limit after every
            /// chunk, and every event within it.
            #[test]
            fn arbitrary_chunks_stay_within_the_limit(bytes in stream_bytes(), cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8), limit in 1usize..64) {
                let mut decoder = Decoder::with_limit(limit);
                let mut at: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
                at.push(0);
                at.push(bytes.len());
                at.sort_unstable();
                for pair in at.windows(2) {
                    match decoder.feed(&bytes[pair[0]..pair[1]]) {
                        Ok(events) => {
                            prop_assert!(decoder.buffer.len() <= limit + 1, "buffer {}", decoder.buffer.len());
                            prop_assert!(decoder.data.len() <= limit);
                            prop_assert!(events.iter().all(|e| e.data.len() <= limit));
                        }
                        Err(TooLarge { limit: said }) => {
                            prop_assert_eq!(said, limit);
                            break;
                        }
                    }
                }
            }

            /// How the bytes are split does not change what comes out.
            #[test]
            fn splitting_does_not_change_the_events(bytes in stream_bytes(), cut in any::<prop::sample::Index>()) {
                let whole = Decoder::default().feed(&bytes).unwrap();
                let cut = cut.index(bytes.len() + 1);
                let mut decoder = Decoder::default();
                let mut split = decoder.feed(&bytes[..cut]).unwrap();
                split.extend(decoder.feed(&bytes[cut..]).unwrap());
                // A trailing CR waits for its possible LF in both cases alike.
                prop_assert_eq!(whole, split);
            }
        }
    }
}
