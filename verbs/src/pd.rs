//! Protection domains.

use std::fmt;
use std::sync::Arc;

use rdma_sys as sys;

use crate::device::{Context, ContextInner};
use crate::error::{Error, Result, last_os_error};

pub(crate) struct PdInner {
    pd: *mut sys::ibv_pd,
    pub(crate) ctx: Arc<ContextInner>,
}

// SAFETY: a PD handle may be used from any thread; libibverbs verbs are thread safe.
unsafe impl Send for PdInner {}
// SAFETY: as above.
unsafe impl Sync for PdInner {}

impl Drop for PdInner {
    fn drop(&mut self) {
        // SAFETY: every MR, QP and SRQ of this PD holds an Arc to it, so none is left; the PD is
        // freed once, before its context (which this struct holds).
        unsafe { sys::ibv_dealloc_pd(self.pd) };
    }
}

/// A protection domain: memory regions and queue pairs of one PD may work together.
/// Cheap to clone; freed after the last region and queue pair made in it.
///
/// ```no_run
/// # use viaduct_verbs::*;
/// # let ctx = Context::open_first()?;
/// let pd = ctx.alloc_pd()?;
/// let mr = pd.allocate(4096, Access::LOCAL_WRITE)?;
/// let cq = ctx.create_cq(64)?;
/// let qp = pd.queue_pair(&cq, &cq).build()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct ProtectionDomain {
    pub(crate) inner: Arc<PdInner>,
}

impl fmt::Debug for ProtectionDomain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProtectionDomain").finish_non_exhaustive()
    }
}

impl ProtectionDomain {
    /// The raw `ibv_pd`, owned by this value: do not free it.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let raw = pd.as_raw(); // for a libibverbs call of your own
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn as_raw(&self) -> *mut sys::ibv_pd {
        self.inner.pd
    }

    /// The context this domain belongs to.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// assert_eq!(pd.context().name(), ctx.name());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn context(&self) -> Context {
        Context {
            inner: self.inner.ctx.clone(),
        }
    }
}

impl Context {
    /// Allocates a protection domain (`ibv_alloc_pd`).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// let pd = ctx.alloc_pd()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn alloc_pd(&self) -> Result<ProtectionDomain> {
        // SAFETY: live context.
        let pd = unsafe { sys::ibv_alloc_pd(self.inner.as_ptr()) };
        if pd.is_null() {
            return Err(Error::AllocPd(last_os_error()));
        }
        Ok(ProtectionDomain {
            inner: Arc::new(PdInner {
                pd,
                ctx: self.inner.clone(),
            }),
        })
    }
}
