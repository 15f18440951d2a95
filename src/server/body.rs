//! An HTTP response body made of a few byte segments, sent in order with an exact length.
//! It lets a large shared buffer (the pre-serialised `tools/list`) go out by reference
//! instead of being copied into a fresh buffer per request.

use std::{
    collections::VecDeque,
    convert::Infallible,
    pin::Pin,
    task::{Context, Poll},
};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

/// The segments, front first.
#[derive(Debug)]
pub struct Segments(VecDeque<Bytes>);

impl Segments {
    pub fn new(segments: Vec<Bytes>) -> Self {
        Self(segments.into_iter().filter(|s| !s.is_empty()).collect())
    }
}

impl Body for Segments {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.get_mut().0.pop_front().map(|s| Ok(Frame::data(s))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.0.iter().map(|s| s.len() as u64).sum())
    }
}
