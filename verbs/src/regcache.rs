//! A registration cache: registered buffers handed out by size class and registered once.
//!
//! Registering memory (`ibv_reg_mr`) pins pages and programs the NIC's translation tables: it
//! costs tens of microseconds per megabyte, far more than moving the bytes once. A
//! [`RegCache`] keeps registered buffers that are not in use and hands one out again when a
//! buffer of the same size class is asked for, so a repeated transfer of the same size
//! registers nothing.
//!
//! # Design, and why no entry can go stale
//!
//! A classic registration cache maps *user* address ranges to registrations; it goes stale
//! when the user frees or remaps the memory while the registration lives (the NIC then reads
//! or writes pages that no longer belong to the range), and needs allocator hooks to notice.
//! This cache never registers memory it does not own: every entry is a [`MemoryRegion`],
//! which owns its page-aligned buffer and deregisters it *before* freeing it. The memory of a
//! cached registration is therefore freed only by dropping that registration, so no cached
//! registration can outlive the memory it maps, by construction and in safe code.
//!
//! - [`RegCache::get`] hands out a [`Pooled`] buffer of at least the length asked for: an idle
//!   buffer of the same size class (powers of two from [`RegCache::MIN_CLASS`]) when one is
//!   cached (a *hit*), else a newly registered one (a *registration*).
//! - A [`Pooled`] buffer is owned by its holder (or by the work request it was posted with,
//!   through the endpoint that posted it). Dropping it gives the registration back to the
//!   cache's idle list; when the cache is gone it is deregistered and freed instead.
//! - The idle list is bounded in bytes ([`RegCache::new`]'s `max_idle_bytes`): past the bound
//!   the least recently used idle buffers are deregistered. Only idle buffers are ever
//!   evicted; a buffer in use, in particular one a posted operation reads or writes, is not in
//!   the idle list, so eviction can never deregister memory the NIC may still touch.
//!
//! Buffers are registered with the access given to the cache (for rendezvous: local write
//! and remote read/write). A buffer whose remote key was given to a peer stays reachable by
//! that peer while its registration lives, also when idle; a cache per connection keeps such
//! buffers from ever being handed to another peer's operations.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::error::Result;
use crate::mr::{Access, MemoryRegion, RemoteRegion};
use crate::pd::ProtectionDomain;

/// Counters of a [`RegCache`].
///
/// ```
/// # use viaduct_verbs::*;
/// let stats = CacheStats::default();
/// assert_eq!((stats.hits, stats.registrations, stats.in_use), (0, 0, 0));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Buffers registered (cache misses).
    pub registrations: u64,
    /// Requests served by an idle registered buffer (cache hits).
    pub hits: u64,
    /// Idle buffers deregistered to keep within the bound.
    pub evictions: u64,
    /// Buffers handed out and not given back yet.
    pub in_use: u64,
    /// Bytes of idle registered buffers.
    pub idle_bytes: usize,
}

struct Idle {
    class: usize,
    region: MemoryRegion,
}

struct CacheInner {
    pd: ProtectionDomain,
    access: Access,
    max_idle_bytes: usize,
    /// Idle buffers, least recently used first.
    idle: VecDeque<Idle>,
    stats: CacheStats,
}

impl CacheInner {
    fn put(&mut self, region: MemoryRegion) {
        self.stats.in_use = self.stats.in_use.saturating_sub(1);
        let class = region.len();
        self.stats.idle_bytes += class;
        self.idle.push_back(Idle { class, region });
        while self.stats.idle_bytes > self.max_idle_bytes {
            let Some(old) = self.idle.pop_front() else {
                break;
            };
            self.stats.idle_bytes -= old.class;
            self.stats.evictions += 1;
            // Dropping deregisters the region, then frees its buffer.
            drop(old.region);
        }
    }
}

/// A cache of registered buffers of one protection domain, reused by size class (see
/// [the module docs](self)). Cheap to clone: clones share the cache.
///
/// ```no_run
/// # use viaduct_verbs::*;
/// # let ctx = Context::open_first()?;
/// # let pd = ctx.alloc_pd()?;
/// let cache = RegCache::new(&pd, Access::REMOTE_READ, 64 << 20);
/// let buf = cache.get(100_000)?; // registered now
/// drop(buf);
/// let again = cache.get(100_000)?; // the same registration
/// assert_eq!(cache.stats().hits, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct RegCache {
    inner: Arc<Mutex<CacheInner>>,
}

impl fmt::Debug for RegCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegCache")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

fn lock(m: &Mutex<CacheInner>) -> MutexGuard<'_, CacheInner> {
    // Nothing panics while the lock is held; a poisoned lock still holds a consistent list.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl RegCache {
    /// The smallest size class in bytes.
    pub const MIN_CLASS: usize = 64 << 10;

    /// An empty cache registering buffers in `pd` with `access`, keeping at most
    /// `max_idle_bytes` of idle buffers.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let cache = RegCache::new(&pd, Access::REMOTE_READ, 64 << 20); // up to 64 MiB idle
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(pd: &ProtectionDomain, access: Access, max_idle_bytes: usize) -> RegCache {
        RegCache {
            inner: Arc::new(Mutex::new(CacheInner {
                pd: pd.clone(),
                access,
                max_idle_bytes,
                idle: VecDeque::new(),
                stats: CacheStats::default(),
            })),
        }
    }

    /// The size class serving `len` bytes.
    ///
    /// ```
    /// # use viaduct_verbs::*;
    /// assert_eq!(RegCache::class_of(100_000), 128 << 10);
    /// assert_eq!(RegCache::class_of(1), RegCache::MIN_CLASS);
    /// ```
    pub fn class_of(len: usize) -> usize {
        len.max(Self::MIN_CLASS)
            .checked_next_power_of_two()
            .unwrap_or(len)
    }

    /// A registered buffer showing `len` bytes: an idle one of the size class if cached, else
    /// one registered now (the registration error, e.g. the memlock limit, is returned).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let cache = RegCache::new(&pd, Access::REMOTE_READ, 64 << 20);
    /// let mut buf = cache.get(5)?;
    /// buf.copy_from_slice(b"hello");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get(&self, len: usize) -> Result<Pooled> {
        let class = Self::class_of(len);
        let mut c = lock(&self.inner);
        // The most recently used buffer of the class: likeliest to be warm in the caches.
        let found = c.idle.iter().rposition(|i| i.class == class);
        let region = match found.and_then(|at| c.idle.remove(at)) {
            Some(idle) => {
                c.stats.idle_bytes -= idle.class;
                c.stats.hits += 1;
                idle.region
            }
            None => {
                let access = c.access;
                let region = c.pd.allocate(class, access)?;
                c.stats.registrations += 1;
                region
            }
        };
        c.stats.in_use += 1;
        Ok(Pooled {
            region: Some(region),
            len,
            home: Arc::downgrade(&self.inner),
        })
    }

    /// The counters.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let cache = RegCache::new(&pd, Access::REMOTE_READ, 64 << 20);
    /// let buf = cache.get(4096)?;
    /// assert_eq!((cache.stats().registrations, cache.stats().in_use), (1, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stats(&self) -> CacheStats {
        lock(&self.inner).stats
    }
}

/// A registered buffer lent by a [`RegCache`]: derefs to its first `len` bytes; dropping it
/// gives the registration back to the cache (or deregisters it when the cache is gone).
///
/// ```no_run
/// # use viaduct_verbs::*;
/// # let ctx = Context::open_first()?;
/// # let pd = ctx.alloc_pd()?;
/// let cache = RegCache::new(&pd, Access::REMOTE_READ, 64 << 20);
/// let buf = cache.get(4096)?;
/// let for_peer = buf.remote(); // the peer RDMA-reads the 4096 bytes
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Pooled {
    /// Always `Some` outside of `Drop` and of an endpoint's posted operation.
    region: Option<MemoryRegion>,
    len: usize,
    home: Weak<Mutex<CacheInner>>,
}

impl fmt::Debug for Pooled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pooled")
            .field("len", &self.len)
            .field("region", &self.region)
            .finish()
    }
}

impl Pooled {
    /// Bytes shown.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let cache = RegCache::new(&pd, Access::empty(), 1 << 20);
    /// assert_eq!(cache.get(1000)?.len(), 1000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no byte is shown.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let cache = RegCache::new(&pd, Access::empty(), 1 << 20);
    /// assert!(cache.get(0)?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of the registered buffer (its size class).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let cache = RegCache::new(&pd, Access::empty(), 1 << 20);
    /// assert_eq!(cache.get(1000)?.capacity(), RegCache::class_of(1000));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn capacity(&self) -> usize {
        self.region.as_ref().map_or(0, MemoryRegion::len)
    }

    /// Shows `len` bytes (at most the capacity).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let cache = RegCache::new(&pd, Access::empty(), 1 << 20);
    /// let mut buf = cache.get(1000)?;
    /// buf.set_len(10);
    /// assert_eq!(buf.len(), 10);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_len(&mut self, len: usize) {
        self.len = len.min(self.capacity());
    }

    /// Descriptor of the shown bytes for a peer (address, length, remote key).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let cache = RegCache::new(&pd, Access::REMOTE_READ, 1 << 20);
    /// let buf = cache.get(1000)?;
    /// assert_eq!(buf.remote().len, 1000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn remote(&self) -> RemoteRegion {
        match &self.region {
            Some(r) => RemoteRegion {
                addr: r.addr(),
                len: self.len as u64,
                rkey: r.rkey(),
            },
            None => RemoteRegion {
                addr: 0,
                len: 0,
                rkey: 0,
            },
        }
    }

    /// The registered region.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let cache = RegCache::new(&pd, Access::empty(), 1 << 20);
    /// let buf = cache.get(1000)?;
    /// let lkey = buf.region().map(|r| r.lkey());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn region(&self) -> Option<&MemoryRegion> {
        self.region.as_ref()
    }
}

impl std::ops::Deref for Pooled {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.region {
            Some(r) => &r[..self.len],
            None => &[],
        }
    }
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl std::ops::DerefMut for Pooled {
    fn deref_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        match &mut self.region {
            Some(r) => &mut r[..len],
            None => &mut [],
        }
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        let Some(region) = self.region.take() else {
            return;
        };
        if let Some(home) = self.home.upgrade() {
            lock(&home).put(region);
        }
        // Else the cache is gone: the region drops here (deregistered, then freed).
    }
}
