//! Settings of a shared-memory connection.

use std::time::Duration;

use super::error::Error;
use super::ring::RECORD_HEADER;

/// Settings of a shared-memory connection. The accepting side's `ring_bytes` wins; every other
/// field is local to its side.
#[derive(Debug, Clone)]
pub struct Config {
    /// Bytes of each direction's ring (a multiple of 4096, at least 64 KiB).
    pub ring_bytes: usize,
    /// Messages up to this many bytes are copied through the ring; longer ones go by rendezvous
    /// (single copy with `process_vm_readv`, or chunks through the ring where not permitted).
    /// Also the largest emulated RDMA write or read.
    pub eager_limit: usize,
    /// Largest message accepted in either direction.
    pub max_message: usize,
    /// Chunk size when a long message is copied through the ring.
    pub chunk_bytes: usize,
    /// Long messages up to this many bytes go through the ring in chunks of
    /// [`Config::ring_copy_chunk`] even where single copy is permitted: the sender copies each
    /// chunk in while the receiver copies the one before out, so both cores copy at once and no
    /// handshake or page pinning comes first. Longer messages use single copy where permitted.
    /// 0 turns the ring copy off (every long message by single copy where permitted).
    pub ring_copy_max: usize,
    /// Chunk size of the ring copy of messages up to [`Config::ring_copy_max`] (smaller chunks
    /// let the receiver start copying out sooner; each costs one record). At most a quarter of
    /// the ring is used, whatever this says.
    pub ring_copy_chunk: usize,
    /// Allow single copy with `process_vm_readv` (it is still only used where a probe at set-up
    /// shows it permitted).
    pub single_copy: bool,
    /// Split the single copy of a long message between both ends: the receiver reads chunks
    /// with `process_vm_readv` while the sender, whenever it makes progress, writes the others
    /// with `process_vm_writev` (each byte is still copied once). Used for messages of more than
    /// one chunk (about a quarter of the message, 64 KiB to 1 MiB) when single copy is
    /// permitted both ways; a receiver with this off copies alone, a sender with this off never
    /// helps.
    pub split_copy: bool,
    /// Most spin iterations `wait` spends polling before it sleeps on the futex; the count adapts
    /// between 1/16 of this and this: it doubles when a spin finds work, halves when it does
    /// not, and quadruples when the sleep after it ends with work within 100 us (the peer
    /// answered about as soon as a sleep and a wake take). 0 sleeps at once.
    pub spin: u32,
    /// How often a waiting or idle endpoint checks that the peer is alive: a dead or closed peer
    /// is noticed, and every outstanding descriptor completed with an error, within about this.
    pub liveness_interval: Duration,
    /// Most emulated RDMA operations and queued long sends outstanding at once.
    pub max_outstanding: usize,
    /// Limit for each step of the set-up handshake.
    pub connect_timeout: Duration,
    /// While this end polls for the next inbound record, also prefetch the later lines of a
    /// record the size of the last one, when that was 2-4 lines long (a payload of 25-216
    /// bytes), so that they travel while the stamp is awaited. Default: on for AMD processors,
    /// off elsewhere. On an AMD EPYC guest whose two cores sat far apart (an 8 B half round
    /// trip of 0.31 us) it took the agent's 64 B ping-pong from 0.41 to 0.31 us and changed
    /// nothing measurable otherwise; on an Intel Xeon guest it made the same ping-pong 15 %
    /// slower (0.36 against 0.415 us, 11 rounds), the prefetches there taking lines from the
    /// producer while it wrote them (`docs/perf/agent.md`).
    pub poll_prefetch: bool,
}

/// Whether this processor is an AMD one (or a Hygon, of the same design).
fn cpu_is_amd() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let id = core::arch::x86_64::__cpuid(0);
        let mut vendor = [0u8; 12];
        vendor[..4].copy_from_slice(&id.ebx.to_le_bytes());
        vendor[4..8].copy_from_slice(&id.edx.to_le_bytes());
        vendor[8..].copy_from_slice(&id.ecx.to_le_bytes());
        &vendor == b"AuthenticAMD" || &vendor == b"HygonGenuine"
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Default of [`Config::ring_copy_max`]: up to here the pipelined ring copy beat single copy
/// on the machine it was measured on (`viaduct bench method latency --transport shm
/// --ring-copy-max N`, alternating runs; see `docs/perf/shm-sweep.md`). With the ring copy
/// of borrowed data going straight from the caller's memory into the ring as far as it has
/// room (only the rest staged, while the receiver drains): 4 MiB took 1.8-3.5 ms by the ring
/// against 3.1-6.4 ms by split single copy (minimum and median of 4 alternating runs, both
/// ends pinned, on a 2-core guest under a load of 5-7); before that change, quiet, 1 MiB
/// 79-86 us by the ring against 461-550 us by single copy, 2 MiB 173-204 against 210-249.
const RING_COPY_MAX: usize = 4 << 20;
/// Default of [`Config::ring_copy_chunk`].
const RING_COPY_CHUNK: usize = 16 << 10;

impl Default for Config {
    fn default() -> Config {
        Config {
            ring_bytes: 1 << 20,
            eager_limit: 16 << 10,
            max_message: 64 << 20,
            chunk_bytes: 64 << 10,
            ring_copy_max: RING_COPY_MAX,
            ring_copy_chunk: RING_COPY_CHUNK,
            single_copy: true,
            split_copy: true,
            spin: 20_000,
            liveness_interval: Duration::from_millis(20),
            max_outstanding: 64,
            connect_timeout: Duration::from_secs(5),
            poll_prefetch: cpu_is_amd(),
        }
    }
}

impl Config {
    /// Checks that the sizes fit together.
    pub fn validate(&self) -> Result<(), Error> {
        if self.ring_bytes < 64 << 10 || self.ring_bytes % 4096 != 0 {
            return Err(Error::Config(format!(
                "ring_bytes {} must be a multiple of 4096 and at least 65536",
                self.ring_bytes
            )));
        }
        let quarter = self.ring_bytes / 4 - RECORD_HEADER;
        if self.eager_limit < 64 || self.eager_limit > quarter {
            return Err(Error::Config(format!(
                "eager_limit {} must lie in 64..={quarter} for rings of {} bytes",
                self.eager_limit, self.ring_bytes
            )));
        }
        if self.chunk_bytes < 64 || self.chunk_bytes > quarter {
            return Err(Error::Config(format!(
                "chunk_bytes {} must lie in 64..={quarter} for rings of {} bytes",
                self.chunk_bytes, self.ring_bytes
            )));
        }
        if self.ring_copy_chunk < 64 {
            return Err(Error::Config(format!(
                "ring_copy_chunk {} must be at least 64",
                self.ring_copy_chunk
            )));
        }
        if self.max_message > u32::MAX as usize || self.max_message < self.eager_limit {
            return Err(Error::Config(format!(
                "max_message {} must lie between eager_limit and 4 GiB",
                self.max_message
            )));
        }
        if self.max_outstanding == 0 || self.liveness_interval.is_zero() {
            return Err(Error::Config(
                "max_outstanding and liveness_interval must be non-zero".into(),
            ));
        }
        Ok(())
    }
}
