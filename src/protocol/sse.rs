//! Incremental Server-Sent Events framing (the `text/event-stream` answers of streamable HTTP
//! and the deprecated HTTP+SSE transport). Bytes go in as they arrive; whole events come out.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The `event:` field; `None` means the default type, `message`.
    pub event: Option<String>,
    pub data: String,
    pub id: Option<String>,
}

/// Accumulates bytes and yields complete events (WHATWG EventSource parsing rules).
#[derive(Debug, Default)]
pub struct Decoder {
    buffer: Vec<u8>,
    event: Option<String>,
    data: String,
    has_data: bool,
    id: Option<String>,
}

impl Decoder {
    /// Feeds a chunk; returns the events it completed.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<Event> {
        self.buffer.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some(end) = self.buffer.iter().position(|b| *b == b'\n' || *b == b'\r') {
            // A CR may be followed by LF; wait for the next byte to know.
            let skip = if self.buffer[end] == b'\r' {
                match self.buffer.get(end + 1) {
                    Some(b'\n') => 2,
                    Some(_) => 1,
                    None => break,
                }
            } else {
                1
            };
            let line: Vec<u8> = self.buffer.drain(..end + skip).take(end).collect();
            let line = String::from_utf8_lossy(&line);
            if let Some(event) = self.line(&line) {
                events.push(event);
            }
        }
        events
    }

    fn line(&mut self, line: &str) -> Option<Event> {
        if line.is_empty() {
            if !self.has_data {
                self.event = None;
                return None;
            }
            self.has_data = false;
            return Some(Event {
                event: self.event.take(),
                data: std::mem::take(&mut self.data),
                id: self.id.clone(),
            });
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = Some(value.to_string()),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "id" => self.id = Some(value.to_string()),
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_and_line_endings() {
        let mut d = Decoder::default();
        assert!(d.feed(b"event: message\r\nda").is_empty());
        let events = d.feed(b"ta: {\"a\":1}\r\n\r\n: comment\n\ndata: x\ndata: y\n\n");
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].event.as_deref(), Some("message"));
        assert_eq!(events[0].data, "{\"a\":1}");
        assert_eq!(events[1].data, "x\ny");
    }

    #[test]
    fn endpoint_events_of_the_legacy_sse_transport() {
        let mut d = Decoder::default();
        let events = d.feed(b"event: endpoint\ndata: /message?sessionId=abc\n\n");
        assert_eq!(events[0].event.as_deref(), Some("endpoint"));
        assert_eq!(events[0].data, "/message?sessionId=abc");
    }
}
