//! [`RecvBuffer`]: where a nonblocking receive puts its message.

use std::any::{Any, TypeId};
use std::sync::{Arc, Mutex, MutexGuard};
use viaduct_fallback::copy::copy;

/// Memory of the caller's that a receive writes into in place (see [`RecvBuffer::caller`]).
pub type CallerMemory = Box<dyn AsMut<[u8]> + Send>;

/// The caller's memory as a receive holds it: its bytes, and the way back to its own type.
trait Lent: Send {
    fn bytes(&mut self) -> &mut [u8];
    fn into_any(self: Box<Self>) -> Box<dyn Any + Send>;
    fn into_boxed(self: Box<Self>) -> CallerMemory;
    fn lent_type(&self) -> TypeId;
}

impl<M: AsMut<[u8]> + Send + 'static> Lent for M {
    fn bytes(&mut self) -> &mut [u8] {
        self.as_mut()
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any + Send> {
        self
    }
    fn into_boxed(self: Box<Self>) -> CallerMemory {
        self
    }
    fn lent_type(&self) -> TypeId {
        TypeId::of::<M>()
    }
}

/// A [`CallerMemory`] handed to [`RecvBuffer::caller`].
struct Boxed(CallerMemory);

impl AsMut<[u8]> for Boxed {
    fn as_mut(&mut self) -> &mut [u8] {
        (*self.0).as_mut()
    }
}

/// Where the bytes of a [`RecvBuffer`] are.
enum Store {
    /// The agent's memory, grown as bytes arrive.
    Owned(Vec<u8>),
    /// The caller's memory; `len` bytes of it received so far.
    Caller { mem: Box<dyn Lent>, len: usize },
    /// The caller took its memory back ([`RecvBuffer::detach`]): bytes go nowhere.
    Detached,
    /// The agent's memory: a registered buffer an RDMA READ put the whole message in (see
    /// [`RecvBuffer::land`]); its registration goes back to its cache when the buffer is
    /// cleared, taken or dropped.
    #[cfg(feature = "rdma")]
    Registered(viaduct_verbs::Pooled),
}

impl Store {
    fn received(&mut self) -> &[u8] {
        match self {
            Store::Owned(v) => v,
            Store::Caller { mem, len } => {
                let m = mem.bytes();
                let n = (*len).min(m.len());
                &m[..n]
            }
            Store::Detached => &[],
            #[cfg(feature = "rdma")]
            Store::Registered(p) => p,
        }
    }

    /// Turns a registered buffer into one of the agent's own memory, keeping its bytes (one
    /// copy), so that more bytes can be appended.
    fn own(&mut self) {
        #[cfg(feature = "rdma")]
        if let Store::Registered(p) = self {
            *self = Store::Owned(p.to_vec());
        }
    }
}

/// Where [`RecvBuffer::fill_in`] lets bytes be written.
pub(crate) enum Room<'a> {
    /// Exactly this slice of the caller's memory.
    Slice(&'a mut [u8]),
    /// This many bytes appended to the agent's memory.
    Append(&'a mut Vec<u8>, usize),
}

/// The destination of a receive: a buffer of fixed capacity that the agent fills and the
/// caller reads once the receive's request completed.
///
/// It is a shared handle (cloning gives another handle on the same bytes): the agent keeps one
/// until the message is in, the caller keeps the other. The agent never writes more than
/// [`RecvBuffer::capacity`] bytes: a longer message is truncated and its request fails with
/// [`AgentError::Truncated`](crate::error::AgentError::Truncated).
///
/// The bytes are in the agent's memory ([`RecvBuffer::new`]), or in memory the caller hands
/// over ([`RecvBuffer::caller`]): the eager and rendezvous protocols then write the message
/// straight into it, with no copy at completion.
///
/// ```
/// # use viaduct_agent::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let agent = Agent::singleton()?;
/// let buf = RecvBuffer::new(16);
/// let mut request = agent.irecv_into(buf.clone(), Source::Rank(0), TagMatch::Tag(1))?;
/// agent.send(0, 1, b"bytes")?;
/// request.wait()?;
/// assert_eq!(buf.take(), b"bytes");
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RecvBuffer {
    data: Arc<Mutex<Store>>,
    capacity: usize,
}

impl std::fmt::Debug for RecvBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBuffer")
            .field("capacity", &self.capacity)
            .field("len", &self.len())
            .field("caller_owned", &self.is_caller_owned())
            .finish()
    }
}

impl RecvBuffer {
    /// An empty buffer that accepts up to `capacity` bytes. Memory is allocated as bytes
    /// arrive. Over verbs, a rendezvous message is read by RDMA into a registered buffer of
    /// the agent's, which this buffer then keeps, with no copy; the registration goes back to
    /// the agent when the buffer is cleared, taken or dropped.
    ///
    /// ```
    /// use viaduct_agent::RecvBuffer;
    ///
    /// let buf = RecvBuffer::new(4096);
    /// assert_eq!((buf.capacity(), buf.len()), (4096, 0));
    /// ```
    pub fn new(capacity: usize) -> RecvBuffer {
        RecvBuffer {
            data: Arc::new(Mutex::new(Store::Owned(Vec::new()))),
            capacity,
        }
    }

    /// A buffer over the caller's memory `mem`, which accepts up to its length: the agent
    /// writes the message into it in place (from the method's receive memory, one copy) and
    /// holds it until the receive completes, fails or is cancelled; the caller reads the
    /// bytes there afterwards (or through [`RecvBuffer::with`]). A receive cancelled before it
    /// matched writes nothing; [`RecvBuffer::detach`] gives the memory back early.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let buf = RecvBuffer::caller(Box::new(vec![0u8; 32]));
    /// let mut request = agent.irecv_into(buf.clone(), Source::Rank(0), TagMatch::Tag(1))?;
    /// agent.send(0, 1, b"in place")?;
    /// request.wait()?;
    /// buf.with(|bytes| assert_eq!(bytes, b"in place"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn caller(mem: CallerMemory) -> RecvBuffer {
        RecvBuffer::caller_of(Boxed(mem))
    }

    /// [`RecvBuffer::caller`] over memory of type `M`, which [`RecvBuffer::detach_as`] gives
    /// back as it is.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let buf = RecvBuffer::caller_of(vec![0u8; 32]);
    /// let mut request = agent.irecv_into(buf.clone(), Source::Rank(0), TagMatch::Tag(1))?;
    /// agent.send(0, 1, b"mine")?;
    /// request.wait()?;
    /// let mem: Vec<u8> = buf.detach_as().expect("a Vec was handed over");
    /// assert_eq!(&mem[..4], b"mine");
    /// # Ok(())
    /// # }
    /// ```
    pub fn caller_of<M: AsMut<[u8]> + Send + 'static>(mut mem: M) -> RecvBuffer {
        let capacity = mem.as_mut().len();
        RecvBuffer {
            data: Arc::new(Mutex::new(Store::Caller {
                mem: Box::new(mem),
                len: 0,
            })),
            capacity,
        }
    }

    /// [`RecvBuffer::detach`] for memory handed over by [`RecvBuffer::caller_of`] as an `M`:
    /// `None` when the buffer holds no caller memory, or memory of another type (which stays).
    ///
    /// ```
    /// use viaduct_agent::RecvBuffer;
    ///
    /// let buf = RecvBuffer::caller_of([0u8; 8]);
    /// assert!(buf.detach_as::<Vec<u8>>().is_none()); // another type: stays
    /// assert_eq!(buf.detach_as::<[u8; 8]>(), Some([0u8; 8]));
    /// ```
    pub fn detach_as<M: 'static>(&self) -> Option<M> {
        let mut d = self.lock();
        match std::mem::replace(&mut *d, Store::Detached) {
            Store::Caller { mem, len } => {
                if mem.lent_type() != TypeId::of::<M>() {
                    *d = Store::Caller { mem, len };
                    return None;
                }
                mem.into_any().downcast::<M>().ok().map(|b| *b)
            }
            other => {
                *d = other;
                None
            }
        }
    }

    /// Whether the bytes land in the caller's memory ([`RecvBuffer::caller`]).
    ///
    /// ```
    /// use viaduct_agent::RecvBuffer;
    ///
    /// assert!(RecvBuffer::caller(Box::new(vec![0u8; 8])).is_caller_owned());
    /// assert!(!RecvBuffer::new(8).is_caller_owned());
    /// ```
    pub fn is_caller_owned(&self) -> bool {
        matches!(*self.lock(), Store::Caller { .. } | Store::Detached)
    }

    /// Takes the caller's memory back (`None` for a buffer of the agent's own): nothing is
    /// written to it afterwards; later bytes of the message, if any, are dropped (the request
    /// still completes).
    ///
    /// ```
    /// use viaduct_agent::RecvBuffer;
    ///
    /// let buf = RecvBuffer::caller(Box::new(vec![0u8; 8]));
    /// let mut mem = buf.detach().expect("caller memory");
    /// assert_eq!(mem.as_mut().as_mut().len(), 8);
    /// assert!(RecvBuffer::new(8).detach().is_none());
    /// ```
    pub fn detach(&self) -> Option<CallerMemory> {
        let mut d = self.lock();
        match std::mem::replace(&mut *d, Store::Detached) {
            Store::Caller { mem, .. } => Some(mem.into_boxed()),
            other => {
                *d = other;
                None
            }
        }
    }

    /// Most bytes this buffer accepts.
    ///
    /// ```
    /// use viaduct_agent::RecvBuffer;
    ///
    /// assert_eq!(RecvBuffer::new(100).capacity(), 100);
    /// ```
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    fn lock(&self) -> MutexGuard<'_, Store> {
        // The lock is only held for copies that cannot panic; a poisoned lock still holds
        // consistent bytes.
        self.data.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Number of bytes received so far.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let (mut request, buf) = agent.irecv(64, Source::Rank(0), TagMatch::Tag(1))?;
    /// agent.send(0, 1, b"12345")?;
    /// request.wait()?;
    /// assert_eq!(buf.len(), 5);
    /// # Ok(())
    /// # }
    /// ```
    pub fn len(&self) -> usize {
        match &*self.lock() {
            Store::Owned(v) => v.len(),
            Store::Caller { len, .. } => *len,
            Store::Detached => 0,
            #[cfg(feature = "rdma")]
            Store::Registered(p) => p.len(),
        }
    }

    /// Whether no byte was received.
    ///
    /// ```
    /// use viaduct_agent::RecvBuffer;
    ///
    /// assert!(RecvBuffer::new(64).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes the received bytes out (the buffer is then empty); for the caller's memory, a
    /// copy of them.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let (mut request, buf) = agent.irecv(64, Source::Rank(0), TagMatch::Tag(1))?;
    /// agent.send(0, 1, b"out")?;
    /// request.wait()?;
    /// assert_eq!(buf.take(), b"out");
    /// assert!(buf.is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub fn take(&self) -> Vec<u8> {
        let mut d = self.lock();
        match &mut *d {
            Store::Owned(v) => std::mem::take(v),
            Store::Detached => Vec::new(),
            #[cfg(feature = "rdma")]
            Store::Registered(p) => {
                let out = p.to_vec();
                *d = Store::Owned(Vec::new());
                out
            }
            Store::Caller { .. } => {
                let out = d.received().to_vec();
                if let Store::Caller { len, .. } = &mut *d {
                    *len = 0;
                }
                out
            }
        }
    }

    /// Empties the buffer but keeps its memory, so that posting it again with
    /// [`Agent::irecv_into`](crate::agent::Agent::irecv_into) receives into the same pages
    /// (no allocation or page faults for a repeated large receive).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let buf = RecvBuffer::new(1 << 16);
    /// for round in 0..3u8 {
    ///     let mut request = agent.irecv_into(buf.clone(), Source::Rank(0), TagMatch::Tag(1))?;
    ///     agent.send(0, 1, &[round; 1000])?;
    ///     request.wait()?;
    ///     buf.with(|b| assert_eq!(b[0], round));
    ///     buf.clear(); // same pages next round
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn clear(&self) {
        let mut d = self.lock();
        match &mut *d {
            Store::Owned(v) => v.clear(),
            Store::Caller { len, .. } => *len = 0,
            Store::Detached => {}
            // The registration goes back to its cache, where the next read takes it again.
            #[cfg(feature = "rdma")]
            Store::Registered(_) => *d = Store::Owned(Vec::new()),
        }
    }

    /// Copies the received bytes to the front of `out`; returns how many were copied.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let (mut request, buf) = agent.irecv(64, Source::Rank(0), TagMatch::Tag(1))?;
    /// agent.send(0, 1, b"copy")?;
    /// request.wait()?;
    /// let mut out = [0u8; 8];
    /// assert_eq!(buf.copy_to(&mut out), 4);
    /// # Ok(())
    /// # }
    /// ```
    pub fn copy_to(&self, out: &mut [u8]) -> usize {
        let mut d = self.lock();
        let d = d.received();
        let n = d.len().min(out.len());
        copy(&mut out[..n], &d[..n]);
        n
    }

    /// Runs `f` on the received bytes without copying them.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let (mut request, buf) = agent.irecv(64, Source::Rank(0), TagMatch::Tag(1))?;
    /// agent.send(0, 1, b"peek")?;
    /// request.wait()?;
    /// let first = buf.with(|bytes| bytes[0]);
    /// assert_eq!(first, b'p');
    /// # Ok(())
    /// # }
    /// ```
    pub fn with<T>(&self, f: impl FnOnce(&[u8]) -> T) -> T {
        f(self.lock().received())
    }

    /// Appends `bytes`, up to the capacity; returns how many were kept.
    pub(crate) fn fill(&self, bytes: &[u8]) -> usize {
        let mut d = self.lock();
        d.own();
        match &mut *d {
            Store::Owned(d) => {
                let room = self.capacity - d.len().min(self.capacity);
                let n = room.min(bytes.len());
                if d.capacity() == 0 && n < bytes.len() {
                    d.reserve_exact(self.capacity);
                }
                d.extend_from_slice(&bytes[..n]);
                n
            }
            Store::Caller { mem, len } => {
                let m = mem.bytes();
                let at = (*len).min(m.len());
                let n = (m.len() - at).min(bytes.len());
                copy(&mut m[at..at + n], &bytes[..n]);
                *len = at + n;
                n
            }
            Store::Detached => 0,
            #[cfg(feature = "rdma")]
            Store::Registered(_) => 0,
        }
    }

    /// Appends up to `n` bytes written by `f` into the room it is given (the caller's memory,
    /// or the end of the agent's own, which `f` must fill completely and without zeroing
    /// first), bounded by the capacity; returns how many were kept. On an error nothing counts
    /// as received.
    pub(crate) fn fill_in<E>(
        &self,
        n: usize,
        f: impl FnOnce(Room<'_>) -> Result<(), E>,
    ) -> Result<usize, E> {
        let mut d = self.lock();
        d.own();
        match &mut *d {
            Store::Owned(d) => {
                let k = (self.capacity - d.len().min(self.capacity)).min(n);
                f(Room::Append(d, k))?;
                Ok(k)
            }
            Store::Caller { mem, len } => {
                let m = mem.bytes();
                let at = (*len).min(m.len());
                let k = (m.len() - at).min(n);
                f(Room::Slice(&mut m[at..at + k]))?;
                *len = at + k;
                Ok(k)
            }
            Store::Detached => Ok(0),
            #[cfg(feature = "rdma")]
            Store::Registered(_) => Ok(0),
        }
    }

    /// The agent's memory of this buffer, for reuse (the buffer is then empty): `None` for the
    /// caller's memory and for a registered buffer (whose registration goes back to its
    /// cache instead).
    pub(crate) fn take_memory(&self) -> Option<Vec<u8>> {
        let mut d = self.lock();
        match &mut *d {
            Store::Owned(v) => Some(std::mem::take(v)),
            #[cfg(feature = "rdma")]
            Store::Registered(_) => {
                *d = Store::Owned(Vec::new());
                None
            }
            _ => None,
        }
    }

    /// Takes the whole message that an RDMA READ put in the registered buffer `data`, without
    /// a copy: a buffer of the agent's own memory with nothing received yet keeps `data` (its
    /// first [`RecvBuffer::capacity`] bytes); any other buffer gets `data` back, to be copied
    /// in with [`RecvBuffer::fill`]. Returns how many bytes were kept.
    #[cfg(feature = "rdma")]
    pub(crate) fn land(
        &self,
        mut data: viaduct_verbs::Pooled,
    ) -> Result<usize, viaduct_verbs::Pooled> {
        let mut d = self.lock();
        match &*d {
            Store::Owned(v) if v.is_empty() => {
                let n = data.len().min(self.capacity);
                data.set_len(n);
                *d = Store::Registered(data);
                Ok(n)
            }
            _ => Err(data),
        }
    }

    /// Prepares room for `want` bytes of a message, taking the memory from `spare` when the
    /// buffer has none yet (nothing to do for the caller's memory).
    pub(crate) fn expect_in(&self, want: usize, spare: &mut crate::spare::Spare) {
        let mut d = self.lock();
        d.own();
        let Store::Owned(d) = &mut *d else {
            return;
        };
        if d.capacity() == 0 && want >= crate::spare::MIN_BYTES {
            *d = spare.take(want);
        } else {
            let extra = want.saturating_sub(d.len());
            d.reserve_exact(extra);
        }
    }
}
