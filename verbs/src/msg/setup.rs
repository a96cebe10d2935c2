//! Setting a message endpoint up: resources and receive ring first ([`Prepared`]), then the
//! connection to the peer's [`Card`].

use std::collections::VecDeque;
use std::ops::Range;
use std::time::Instant;

use super::card::Card;
use super::config::Config;
use super::endpoint::{Endpoint, RECV_BASE, Rdma};
use super::error::Error;
use super::header::{HEADER_LEN, TAG_SLOTS};
use super::pool::ReceivePool;
use crate::channel::CompletionChannel;
use crate::cq::{CompletionQueue, Completions};
use crate::device::Context;
use crate::mr::{Access, MemoryRegion};
use crate::pd::ProtectionDomain;
use crate::qp::PreparedQueuePair;
use crate::regcache::RegCache;
use crate::wr::RecvRequest;

/// Bytes of the keepalive word.
pub(crate) const KEEPALIVE_LEN: usize = 8;

/// A message endpoint whose queue pair exists and whose receive ring is posted, waiting for
/// the peer's card. Publish [`Prepared::card`], then [`Prepared::connect`] with the peer's.
pub struct Prepared {
    config: Config,
    pd: ProtectionDomain,
    channel: CompletionChannel,
    cq: CompletionQueue,
    qp: PreparedQueuePair,
    slots: Vec<(u32, MemoryRegion)>,
    keepalive_dst: MemoryRegion,
    keepalive_src: MemoryRegion,
    recv_ranges: Vec<Range<usize>>,
    max_piece: usize,
    pool: Option<ReceivePool>,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("qp", &self.qp)
            .finish_non_exhaustive()
    }
}

impl Prepared {
    /// Creates the protection domain, completion channel and queue, the RC queue pair, the
    /// registered receive buffers (posted at once) and send slots, on `ctx`.
    pub fn new(ctx: &Context, config: Config) -> Result<Prepared, Error> {
        Prepared::build(ctx, config, None)
    }

    /// Like [`Prepared::new`], but the queue pair receives from `pool`'s shared receive queue
    /// (and everything is registered on the pool's protection domain): the endpoint registers
    /// no receive buffers of its own, and grants its peer `config.recv_buffers` credits drawn
    /// from the pool. `config.buffer_bytes` must be the pool's.
    pub fn with_pool(ctx: &Context, config: Config, pool: &ReceivePool) -> Result<Prepared, Error> {
        if config.buffer_bytes != pool.buffer_bytes() {
            return Err(Error::Config(format!(
                "buffer_bytes {} differs from the receive pool's {}",
                config.buffer_bytes,
                pool.buffer_bytes()
            )));
        }
        Prepared::build(ctx, config, Some(pool))
    }

    fn build(ctx: &Context, config: Config, pool: Option<&ReceivePool>) -> Result<Prepared, Error> {
        config.validate()?;
        let port_max = ctx
            .port(config.port)
            .map_err(Error::verbs("querying the port"))?
            .max_msg_size as usize;
        let max_piece = if port_max == 0 {
            config.rdma_piece
        } else {
            config.rdma_piece.min(port_max)
        };
        let pd = match pool {
            Some(pool) => pool.protection_domain().clone(),
            None => ctx
                .alloc_pd()
                .map_err(Error::verbs("allocating a protection domain"))?,
        };
        let channel = ctx
            .create_channel()
            .map_err(Error::verbs("creating a completion channel"))?;
        channel
            .set_nonblocking(true)
            .map_err(Error::verbs("making the completion channel nonblocking"))?;
        let cq = ctx
            .create_cq_with_channel(
                config.recv_buffers + config.send_slots + config.rdma_ops + 8,
                &channel,
            )
            .map_err(Error::verbs("creating a completion queue"))?;
        let mut builder = pd
            .queue_pair(&cq, &cq)
            .max_send_wr(config.send_slots + 2 + config.rdma_ops)
            .max_recv_wr(config.recv_buffers)
            .port(config.port)
            .access(Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ);
        if let Some(i) = config.gid_index {
            builder = builder.gid_index(i);
        }
        if let Some(pool) = pool {
            builder = builder.srq(pool.srq());
        }
        let qp = builder
            .build()
            .map_err(Error::verbs("creating a queue pair"))?;
        let size = config.buffer_bytes as usize;
        let mut recv_ranges = Vec::new();
        if pool.is_none() {
            let mut recvs = Vec::with_capacity(config.recv_buffers as usize);
            for i in 0..config.recv_buffers {
                let mr = pd
                    .allocate(size, Access::LOCAL_WRITE)
                    .map_err(Error::verbs("registering a receive buffer"))?;
                recv_ranges.push(mr.addr() as usize..mr.addr() as usize + mr.len());
                recvs.push(RecvRequest::new(RECV_BASE | u64::from(i), mr));
            }
            qp.post_recv(recvs)
                .map_err(|e| Error::verbs("posting the receive buffers")(e.error))?;
        }
        let mut slots = Vec::with_capacity(config.send_slots as usize);
        for i in 0..config.send_slots {
            let mr = pd
                .allocate(size, Access::empty())
                .map_err(Error::verbs("registering a send slot"))?;
            slots.push((i, mr));
        }
        // Reversed so that slot 0 is taken first (a stack).
        slots.reverse();
        let keepalive_dst = pd
            .allocate(KEEPALIVE_LEN, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
            .map_err(Error::verbs("registering the keepalive region"))?;
        let keepalive_src = pd
            .allocate(KEEPALIVE_LEN, Access::empty())
            .map_err(Error::verbs("registering the keepalive source"))?;
        Ok(Prepared {
            config,
            pd,
            channel,
            cq,
            qp,
            slots,
            keepalive_dst,
            keepalive_src,
            recv_ranges,
            max_piece,
            pool: pool.cloned(),
        })
    }

    /// Bytes this endpoint registered for receives of its own (none with a shared pool: see
    /// [`ReceivePool::registered_bytes`]).
    pub fn own_receive_bytes(&self) -> usize {
        self.recv_ranges.iter().map(|r| r.len()).sum()
    }

    /// What the peer needs to connect to this endpoint.
    pub fn card(&self) -> Card {
        Card {
            qp: self.qp.endpoint(),
            recv_buffers: self.config.recv_buffers,
            buffer_bytes: self.config.buffer_bytes,
            keepalive: self.keepalive_dst.remote(),
            shared_receive: self.pool.is_some(),
        }
    }

    /// Connects the queue pair to the peer's (INIT -> RTR -> RTS). Nothing is sent: the peer
    /// may connect its side a little later (its receive ring is posted already, and sends to a
    /// queue pair not yet ready are retried for about `peer_timeout`).
    pub fn connect(self, peer: &Card) -> Result<Endpoint, Error> {
        if peer.recv_buffers < 2 || (peer.buffer_bytes as usize) <= HEADER_LEN {
            return Err(Error::Card(format!(
                "the peer's receive ring ({} buffers of {} bytes) is too small",
                peer.recv_buffers, peer.buffer_bytes
            )));
        }
        if (peer.keepalive.len as usize) < KEEPALIVE_LEN {
            return Err(Error::Card(format!(
                "the peer's keepalive region of {} bytes is too small",
                peer.keepalive.len
            )));
        }
        let mut options = self.config.connect_options();
        if peer.shared_receive {
            // The peer's pool may be empty for a moment (see `ReceivePool`): retry for ever;
            // a peer that is gone still shows as transport retry exceeded.
            options.rnr_retry = 7;
        }
        let qp = self
            .qp
            .connect(&peer.qp, &options)
            .map_err(Error::verbs("connecting the queue pair"))?;
        let frag = (self.config.buffer_bytes.min(peer.buffer_bytes) as usize) - HEADER_LEN;
        // Remote read for buffers the peer reads, remote write for buffers it writes into
        // (the agent's rendezvous); the cache is this connection's, so only this peer gets the
        // keys (a buffer goes back to the cache once the operation on it is over).
        let cache = RegCache::new(
            &self.pd,
            Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE,
            self.config.cache_bytes,
        );
        Ok(Endpoint {
            qp,
            cq: self.cq,
            channel: self.channel,
            _pd: self.pd,
            credits: peer.recv_buffers,
            frag,
            to_return: 0,
            held: 0,
            free_slots: self.slots,
            slot_owner: vec![None; self.config.send_slots as usize],
            outgoing: VecDeque::new(),
            next_seq: 0,
            rx: VecDeque::new(),
            tx_tags: Box::new([None; TAG_SLOTS]),
            rx_tags: Box::new([None; TAG_SLOTS]),
            current: super::endpoint::Current::Idle,
            assembly: Vec::new(),
            completions: VecDeque::new(),
            polled: Completions::with_batch(32),
            spare_segments: Vec::new(),
            failed: None,
            peer_closed: false,
            keepalive_to: peer.keepalive,
            keepalive_src: Some(self.keepalive_src),
            _keepalive_dst: self.keepalive_dst,
            keepalive_count: 0,
            last_send: Instant::now(),
            sends_out: 0,
            waiting_since: None,
            sent_since_clock: false,
            acked_since_clock: false,
            pacer: crate::pacer::ClockPacer::new(),
            recv_ranges: self.recv_ranges,
            returns: super::lease::Returns::new(self.pool.clone()),
            lent: None,
            leases_out: 0,
            next_lease: 0,
            pool: self.pool,
            cache,
            max_piece: self.max_piece,
            rdma: Rdma::default(),
            config: self.config,
        })
    }
}

/// Two endpoints on `ctx` connected to each other (both ends in this process), as tests and
/// benchmarks use them.
pub fn pair(ctx: &Context, config: Config) -> Result<(Endpoint, Endpoint), Error> {
    let a = Prepared::new(ctx, config.clone())?;
    let b = Prepared::new(ctx, config)?;
    let (ca, cb) = (a.card(), b.card());
    Ok((a.connect(&cb)?, b.connect(&ca)?))
}

/// Two endpoints on `ctx` connected to each other, both receiving from one new
/// [`ReceivePool`] made with `config`; the pool is returned too.
pub fn pair_shared(
    ctx: &Context,
    config: Config,
) -> Result<(Endpoint, Endpoint, ReceivePool), Error> {
    let pool = ReceivePool::new(ctx, &config)?;
    let a = Prepared::with_pool(ctx, config.clone(), &pool)?;
    let b = Prepared::with_pool(ctx, config, &pool)?;
    let (ca, cb) = (a.card(), b.card());
    Ok((a.connect(&cb)?, b.connect(&ca)?, pool))
}
