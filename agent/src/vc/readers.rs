//! The read queue of one VC: the places reserved in its inbound byte stream, oldest first,
//! and the copy of stream bytes into the buffers bound to them (see [`crate::stream`] for the
//! operations on top of it: `Agent::reserve_read`, `Agent::read`, `Agent::readv`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use crate::error::AgentError;
use crate::method::MethodError;
use crate::proto::recv::Completions;
use crate::request::CarCounter;
use crate::vc::{Link, Vc};
use crate::wire::{self, Kind};

/// Where the buffers of a finished read are handed back to the waiting handle.
pub(crate) type Slot<B> = Arc<Mutex<Option<Vec<B>>>>;

/// The caller's buffers of one bound read, type-erased for the VC's reader queue.
trait Sink: Send {
    fn segment_count(&self) -> usize;
    fn segment(&mut self, i: usize) -> &mut [u8];
    /// Hands the buffers back to the waiting handle.
    fn finish(self: Box<Self>);
}

struct Typed<B> {
    segments: Vec<B>,
    slot: Slot<B>,
}

impl<B: AsMut<[u8]> + Send + 'static> Sink for Typed<B> {
    fn segment_count(&self) -> usize {
        self.segments.len()
    }

    fn segment(&mut self, i: usize) -> &mut [u8] {
        self.segments[i].as_mut()
    }

    fn finish(self: Box<Self>) {
        let Typed { segments, slot } = *self;
        *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(segments);
    }
}

/// Buffers bound to a reserved place, and where the next byte goes.
struct Bound {
    sink: Box<dyn Sink>,
    segment: usize,
    offset: usize,
    counter: CarCounter,
    /// The agent's count of completed requests.
    done: Completions,
}

/// One reserved place in a VC's inbound stream.
pub(crate) struct Reader {
    id: u64,
    len: usize,
    got: usize,
    bound: Option<Bound>,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("id", &self.id)
            .field("len", &self.len)
            .field("got", &self.got)
            .field("bound", &self.bound.is_some())
            .finish()
    }
}

impl Reader {
    /// Copies as much of `data` as this read still wants; returns the bytes taken.
    fn take_from(&mut self, mut data: &[u8]) -> usize {
        let Some(b) = self.bound.as_mut() else {
            return 0;
        };
        let mut taken = 0;
        while self.got < self.len && !data.is_empty() && b.segment < b.sink.segment_count() {
            let seg = b.sink.segment(b.segment);
            let room = seg.len() - b.offset;
            let n = room.min(data.len()).min(self.len - self.got);
            seg[b.offset..b.offset + n].copy_from_slice(&data[..n]);
            b.offset += n;
            self.got += n;
            taken += n;
            data = &data[n..];
            if b.offset == seg.len() {
                b.segment += 1;
                b.offset = 0;
            }
        }
        taken
    }

    fn done(&self) -> bool {
        self.bound.is_some() && self.got == self.len
    }

    /// Completes the read: buffers back to the handle first, then the request.
    fn complete(self) {
        if let Some(b) = self.bound {
            b.sink.finish();
            b.done.note(b.counter.complete_car(self.len as u64));
        }
    }

    fn fail(self, error: AgentError) {
        if let Some(b) = self.bound {
            b.done.note(b.counter.fail_car(error));
        }
    }
}

/// The reserved reads of one VC, oldest first.
#[derive(Debug, Default)]
pub(crate) struct ReadQueue {
    readers: VecDeque<Reader>,
}

impl ReadQueue {
    /// Holds a place for the next `len` stream bytes, behind every place held before.
    pub(crate) fn reserve(&mut self, id: u64, len: usize) {
        self.readers.push_back(Reader {
            id,
            len,
            got: 0,
            bound: None,
        });
    }

    /// Gives up the place `id` (its read, if bound, is neither completed nor failed).
    pub(crate) fn remove(&mut self, id: u64) {
        self.readers.retain(|r| r.id != id);
    }

    /// Binds `segments` to the place `id`: the bytes go into them front to back, the
    /// segments go back through `slot` and the read completes through `counter` (noted in
    /// `done`). Gives `counter` back when no such place is held (the VC failed since).
    pub(crate) fn bind<B: AsMut<[u8]> + Send + 'static>(
        &mut self,
        id: u64,
        segments: Vec<B>,
        slot: Slot<B>,
        counter: CarCounter,
        done: Completions,
    ) -> Result<(), CarCounter> {
        match self.readers.iter_mut().find(|r| r.id == id) {
            Some(r) => {
                r.bound = Some(Bound {
                    sink: Box::new(Typed { segments, slot }),
                    segment: 0,
                    offset: 0,
                    counter,
                    done,
                });
                Ok(())
            }
            None => Err(counter),
        }
    }

    /// Whether reads are reserved (bound or not).
    pub(crate) fn is_empty(&self) -> bool {
        self.readers.is_empty()
    }

    /// Fails every reserved read (the VC failed or the agent was finalized).
    pub(crate) fn fail_all(&mut self, error: impl Fn() -> AgentError) {
        for r in self.readers.drain(..) {
            r.fail(error());
        }
    }
}

impl Vc {
    /// Copies stream bytes waiting at the head of this VC into the reserved reads, oldest
    /// first, as far as their buffers are bound; completes the reads that have all their
    /// bytes. Returns the work done (messages touched, reads completed).
    pub(crate) fn feed_readers(&mut self) -> Result<usize, MethodError> {
        let fed = self.feed_readers_once();
        if fed.is_err() {
            // The method reported the failure: nothing more comes from this VC.
            self.drained = true;
        }
        fed
    }

    fn feed_readers_once(&mut self) -> Result<usize, MethodError> {
        let mut work = 0;
        let Link::Remote(m) = &mut self.link else {
            return Ok(0);
        };
        let queue = &mut self.readers.readers;
        loop {
            while queue.front().is_some_and(Reader::done) {
                if let Some(r) = queue.pop_front() {
                    r.complete();
                    work += 1;
                }
            }
            let Some(reader) = queue.front_mut() else {
                break;
            };
            if reader.bound.is_none() || !self.stream_at_head {
                break;
            }
            let (taken, whole) = match m.next()? {
                Some((tag, data)) if wire::is_kind(tag, Kind::Stream) => {
                    let n = reader.take_from(data);
                    (n, n == data.len())
                }
                _ => {
                    self.stream_at_head = false;
                    break;
                }
            };
            m.consume(taken)?;
            work += 1;
            if whole {
                // The next message may be stream bytes too: look without reading it.
                self.stream_at_head = matches!(
                    m.next()?,
                    Some((tag, _)) if wire::is_kind(tag, Kind::Stream)
                );
            }
        }
        Ok(work)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Request;

    fn bound_reader(len: usize, segments: Vec<Vec<u8>>) -> (Reader, Slot<Vec<u8>>, Request) {
        let (request, counter) = Request::message(1);
        let slot: Slot<Vec<u8>> = Arc::new(Mutex::new(None));
        let reader = Reader {
            id: 1,
            len,
            got: 0,
            bound: Some(Bound {
                sink: Box::new(Typed {
                    segments,
                    slot: Arc::clone(&slot),
                }),
                segment: 0,
                offset: 0,
                counter,
                done: Completions::default(),
            }),
        };
        (reader, slot, request)
    }

    #[test]
    fn reads_fill_segments_in_order_and_stop_at_their_length() {
        let (mut r, slot, mut request) = bound_reader(6, vec![vec![0; 2], vec![], vec![0; 5]]);
        assert_eq!(r.take_from(b"abc"), 3);
        assert!(!r.done());
        // Only the 3 bytes still reserved are taken from a longer message.
        assert_eq!(r.take_from(b"defgh"), 3);
        assert!(r.done());
        assert_eq!(r.take_from(b"x"), 0);
        r.complete();
        let status = request.test().unwrap().expect("complete");
        assert_eq!(status.count(), 6);
        let segs = slot.lock().unwrap().take().unwrap();
        assert_eq!(segs, vec![b"ab".to_vec(), vec![], b"cdef\0".to_vec()]);
    }

    #[test]
    fn an_unbound_reader_takes_nothing_and_failing_fails_its_request() {
        let mut unbound = Reader {
            id: 2,
            len: 4,
            got: 0,
            bound: None,
        };
        assert_eq!(unbound.take_from(b"abcd"), 0);
        assert!(!unbound.done());
        let (r, slot, mut request) = bound_reader(4, vec![vec![0; 4]]);
        let mut q = ReadQueue::default();
        q.readers.push_back(r);
        q.readers.push_back(unbound);
        q.fail_all(|| AgentError::Finalized);
        assert!(q.is_empty());
        assert!(request.test().is_err());
        assert!(slot.lock().unwrap().is_none());
    }
}
