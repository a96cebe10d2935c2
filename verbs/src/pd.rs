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
    pub fn as_raw(&self) -> *mut sys::ibv_pd {
        self.inner.pd
    }

    /// The context this domain belongs to.
    pub fn context(&self) -> Context {
        Context {
            inner: self.inner.ctx.clone(),
        }
    }
}

impl Context {
    /// Allocates a protection domain (`ibv_alloc_pd`).
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
