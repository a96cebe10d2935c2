//! What the running kernel's io_uring offers, probed once per ring.

use std::fmt;

use io_uring::{IoUring, Probe, opcode};

use super::error::UringError;

/// The io_uring features this engine uses, as found on the running kernel.
///
/// Get one with [`Features::probe`] (creates and drops two small rings) or from a live ring with
/// [`super::Ring::features`]. `Display` prints one `name: yes/no` line per feature, which is what
/// `viaduct info` shows. Where a feature is missing the engine degrades: no `ext_arg` means timed
/// waits use a timeout operation instead, no `multishot_recv` means one receive per submission, no
/// `pbuf_ring` means receives bring their own buffers.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(clippy::struct_excessive_bools)]
pub struct Features {
    /// `uname -r` of the running kernel.
    pub kernel_release: String,
    /// Submission queue entries of the probing ring.
    pub sq_entries: u32,
    /// Completion queue entries of the probing ring.
    pub cq_entries: u32,
    /// `IORING_FEAT_NODROP`: completions beyond the CQ are kept by the kernel, not dropped.
    pub nodrop: bool,
    /// `IORING_FEAT_SUBMIT_STABLE`: SQE data is consumed at submission.
    pub submit_stable: bool,
    /// `IORING_FEAT_EXT_ARG`: `io_uring_enter` takes a timeout directly.
    pub ext_arg: bool,
    /// `IORING_FEAT_FAST_POLL`: socket operations poll internally instead of using a worker.
    pub fast_poll: bool,
    /// `IORING_FEAT_SQPOLL_NONFIXED`: SQPOLL works without registered files.
    pub sqpoll_nonfixed: bool,
    /// `IORING_SETUP_COOP_TASKRUN` was asked for and accepted (fewer interrupts for task work;
    /// false on a ring with deferred task work, which replaces it).
    pub coop_taskrun: bool,
    /// `IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN` (task work kept for the
    /// issuer's next enter; see [`crate::uring::RingConfig::single_issuer`]): of a ring, whether
    /// it was asked for and accepted; of [`Features::probe`], whether the kernel accepts it.
    pub defer_taskrun: bool,
    /// `IORING_OP_READ` / `IORING_OP_WRITE`.
    pub read_write: bool,
    /// `IORING_OP_READ_FIXED` / `IORING_OP_WRITE_FIXED` (registered buffers).
    pub fixed_buffers: bool,
    /// `IORING_OP_ASYNC_CANCEL`.
    pub async_cancel: bool,
    /// `IORING_OP_TIMEOUT`.
    pub timeout: bool,
    /// `IORING_OP_SEND` / `IORING_OP_RECV`.
    pub send_recv: bool,
    /// `IORING_OP_SEND_ZC`: zero-copy send.
    pub send_zc: bool,
    /// `IORING_REGISTER_PBUF_RING`: provided-buffer rings (checked by registering one).
    pub pbuf_ring: bool,
    /// Multishot receive (`IORING_RECV_MULTISHOT`, Linux 6.0): inferred from provided-buffer rings
    /// together with `IORING_OP_SEND_ZC`, which arrived in the same release.
    pub multishot_recv: bool,
}

impl Features {
    /// Probes the running kernel with a small ring (and a second, single-issuer one).
    ///
    /// This is the entry point for reporting (`viaduct info`). It fails with the diagnosed
    /// [`UringError`] when io_uring cannot be used at all.
    pub fn probe() -> Result<Self, UringError> {
        let ring = super::Ring::<()>::new(&super::RingConfig::new(8).eventfd(false))?;
        let mut features = ring.features().clone();
        // Whether the kernel would take a single-issuer ring, asked of one of its own.
        features.defer_taskrun =
            super::Ring::<()>::new(&super::RingConfig::new(8).eventfd(false).single_issuer(true))
                .is_ok_and(|r| r.features().defer_taskrun);
        Ok(features)
    }

    /// Probes a live ring; `coop_taskrun` and `defer_taskrun` tell which task-work setup it
    /// was built with.
    pub(crate) fn of_ring(ring: &IoUring, coop_taskrun: bool, defer_taskrun: bool) -> Self {
        let params = ring.params();
        let mut probe = Probe::new();
        let probed = ring.submitter().register_probe(&mut probe).is_ok();
        let has = |code: u8| probed && probe.is_supported(code);
        let pbuf_ring = pbuf_ring_works(ring);
        let send_zc = has(opcode::SendZc::CODE);
        Self {
            kernel_release: kernel_release(),
            sq_entries: params.sq_entries(),
            cq_entries: params.cq_entries(),
            nodrop: params.is_feature_nodrop(),
            submit_stable: params.is_feature_submit_stable(),
            ext_arg: params.is_feature_ext_arg(),
            fast_poll: params.is_feature_fast_poll(),
            sqpoll_nonfixed: params.is_feature_sqpoll_nonfixed(),
            coop_taskrun,
            defer_taskrun,
            read_write: has(opcode::Read::CODE) && has(opcode::Write::CODE),
            fixed_buffers: has(opcode::ReadFixed::CODE) && has(opcode::WriteFixed::CODE),
            async_cancel: has(opcode::AsyncCancel::CODE),
            timeout: has(opcode::Timeout::CODE),
            send_recv: has(opcode::Send::CODE) && has(opcode::Recv::CODE),
            send_zc,
            pbuf_ring,
            multishot_recv: pbuf_ring && send_zc,
        }
    }
}

/// Registers and unregisters a one-entry provided-buffer ring to see if the kernel takes it.
fn pbuf_ring_works(ring: &IoUring) -> bool {
    const PROBE_GROUP: u16 = u16::MAX;
    let Ok(map) = super::buf_ring::PageMap::new(4096) else {
        return false;
    };
    // SAFETY: `map` is a page-aligned mapping large enough for one ring entry; it stays mapped
    // until after the ring is unregistered below.
    let ok = unsafe {
        ring.submitter()
            .register_buf_ring_with_flags(map.addr() as u64, 1, PROBE_GROUP, 0)
            .is_ok()
    };
    if ok {
        let _ = ring.submitter().unregister_buf_ring(PROBE_GROUP);
    }
    drop(map);
    ok
}

/// `uname -r`, or `unknown`.
fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".to_owned())
}

impl fmt::Display for Features {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let yn = |b: bool| if b { "yes" } else { "no" };
        writeln!(f, "kernel: {}", self.kernel_release)?;
        writeln!(
            f,
            "ring entries (sq/cq): {}/{}",
            self.sq_entries, self.cq_entries
        )?;
        let rows = [
            ("nodrop", self.nodrop),
            ("submit_stable", self.submit_stable),
            ("ext_arg (timed waits)", self.ext_arg),
            ("fast_poll", self.fast_poll),
            ("sqpoll_nonfixed", self.sqpoll_nonfixed),
            ("coop_taskrun", self.coop_taskrun),
            ("defer_taskrun (single issuer)", self.defer_taskrun),
            ("read/write", self.read_write),
            ("fixed buffers", self.fixed_buffers),
            ("async cancel", self.async_cancel),
            ("timeout", self.timeout),
            ("send/recv", self.send_recv),
            ("send_zc", self.send_zc),
            ("provided-buffer ring", self.pbuf_ring),
            ("multishot recv", self.multishot_recv),
        ];
        for (name, on) in rows {
            writeln!(f, "{name}: {}", yn(on))?;
        }
        Ok(())
    }
}
