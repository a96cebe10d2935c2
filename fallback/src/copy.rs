//! Copies of message bytes that do not go through `rep movsb`.
//!
//! glibc's `memcpy` (2.36 here) copies from 2 KiB up (its `x86_rep_movsb_threshold`) with the
//! string instruction `rep movsb`. On this machine's AMD EPYC that instruction is slow, and
//! slower still when source and destination lie at different offsets within a cache line,
//! which is the usual case for a message: the sender's buffer is wherever `malloc` put it and
//! a ring record's payload starts 40 bytes into a line. Measured with a C loop of `memcpy`
//! (best of 7), with `rep movsb` against glibc's vector loop (the same binary under
//! `GLIBC_TUNABLES=glibc.cpu.x86_rep_movsb_threshold=10000000`):
//!
//! | bytes | offsets within a line | `rep movsb` | vector loop |
//! |---|---|---|---|
//! | 4096 | 0 and 0 | 50.7 ns | 35.5 ns |
//! | 4096 | 16 and 40 | 107.9 ns | 49.5 ns |
//! | 16384 | 16 and 40 | 491.5 ns | 187.5 ns |
//! | 65536 | 16 and 40 | 1539 ns | 1162 ns |
//! | 65536 | 0 and 0 | 1136 ns | 1138 ns |
//!
//! A library cannot set glibc's tunables for the program it runs in (they are read once, at
//! start), so [`copy`] copies lengths in [`VECTOR_MIN`]..=[`VECTOR_MAX`] itself with 32-byte
//! (AVX2) or 16-byte (SSE2) unaligned loads and stores, and leaves the others to
//! `copy_from_slice`, which is already a vector loop below and non-temporal stores far above.
//!
//! **Where it is used: copies out of shared memory, not into it.** A message's receiver copies
//! out of the ring (or its reassembly buffer) into its own memory with [`copy`]: the agent's
//! receive into the caller's buffer, a ring chunk into the reassembly buffer. The sender's copy
//! into a ring record stays with `copy_from_slice`, which measured faster there: the record's
//! lines were last read by the other CPU, and most likely `rep movsb` writes whole lines
//! without first fetching them, where vector stores fetch each line from the other CPU.
//! Measured with the agent's ping-pong over shared
//! memory (`viaduct launch -n 2 --bind-to core -- viaduct bench latency --transport shm`, 8
//! alternating rounds in the machine's fast phase, half round trip in us):
//!
//! | bytes | `copy_from_slice` both ways | [`copy`] out of the ring | [`copy`] both ways |
//! |---|---|---|---|
//! | 4096 | 0.64-0.71 | 0.58-0.62 | 0.32-0.66 (mostly 0.64-0.66) |
//! | 16384 | 1.65-1.81 | 0.93-1.68 (mostly 1.49-1.63) | 0.94-1.70 |
//! | 65536 | 5.53-5.84 | 5.25-5.66 | 4.87-5.86 |

/// Shortest copy [`copy`] does itself: glibc uses its vector loop below its `rep movsb`
/// threshold (2 KiB).
pub const VECTOR_MIN: usize = 2048;

/// Longest copy [`copy`] does itself. Above it, the copy no longer fits the caches, and
/// glibc's non-temporal stores (from about three quarters of the last-level cache shared per
/// thread) keep the destination from evicting everything else.
pub const VECTOR_MAX: usize = 256 << 10;

/// Copies `src` into `dst`, which must be as long (panics otherwise, as
/// `copy_from_slice`). See the module documentation for why not `copy_from_slice` alone.
///
/// ```
/// let src: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
/// let mut dst = vec![0u8; 10_000 + 7];
/// viaduct_fallback::copy::copy(&mut dst[7..], &src);
/// assert_eq!(&dst[7..], &src[..]);
/// ```
#[inline]
pub fn copy(dst: &mut [u8], src: &[u8]) {
    assert_eq!(
        dst.len(),
        src.len(),
        "copy: destination and source lengths differ"
    );
    let n = src.len();
    if !(VECTOR_MIN..=VECTOR_MAX).contains(&n) {
        dst.copy_from_slice(src);
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 is present (checked just above); `dst` and `src` are `n` bytes
            // each, `n >= VECTOR_MIN >= 128`, and a `&mut` and a `&` slice never overlap.
            unsafe { x86::copy_avx2(dst.as_mut_ptr(), src.as_ptr(), n) };
        } else {
            // SAFETY: SSE2 is part of x86_64; the lengths and the disjointness as above.
            unsafe { x86::copy_sse2(dst.as_mut_ptr(), src.as_ptr(), n) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    dst.copy_from_slice(src);
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{
        __m128i, __m256i, _mm_loadu_si128, _mm_storeu_si128, _mm256_loadu_si256,
        _mm256_storeu_si256,
    };

    /// Copies `n` bytes (at least 128) from `src` to `dst` in blocks of 128 bytes, the last
    /// block overlapping the one before it.
    ///
    /// # Safety
    ///
    /// AVX2 is available; `dst` and `src` are valid for `n` bytes each and do not overlap;
    /// `n >= 128`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn copy_avx2(dst: *mut u8, src: *const u8, n: usize) {
        /// Copies one block of 128 bytes at `at`.
        ///
        /// # Safety
        ///
        /// As for `copy_avx2`, with `at + 128 <= n`.
        #[inline(always)]
        unsafe fn block(dst: *mut u8, src: *const u8, at: usize) {
            // SAFETY: `at + 128 <= n` (the caller's), so every load and store of 32 bytes
            // lies inside the two buffers; the unaligned forms take any address.
            unsafe {
                let s = src.add(at).cast::<__m256i>();
                let d = dst.add(at).cast::<__m256i>();
                let (a, b) = (_mm256_loadu_si256(s), _mm256_loadu_si256(s.add(1)));
                let (c, e) = (_mm256_loadu_si256(s.add(2)), _mm256_loadu_si256(s.add(3)));
                _mm256_storeu_si256(d, a);
                _mm256_storeu_si256(d.add(1), b);
                _mm256_storeu_si256(d.add(2), c);
                _mm256_storeu_si256(d.add(3), e);
            }
        }
        let mut at = 0;
        while at + 128 <= n {
            // SAFETY: `at + 128 <= n`.
            unsafe { block(dst, src, at) };
            at += 128;
        }
        if at < n {
            // SAFETY: `n >= 128`, so `n - 128 + 128 <= n`.
            unsafe { block(dst, src, n - 128) };
        }
    }

    /// As `copy_avx2`, with 16-byte loads and stores.
    ///
    /// # Safety
    ///
    /// `dst` and `src` are valid for `n` bytes each and do not overlap; `n >= 64`.
    pub(super) unsafe fn copy_sse2(dst: *mut u8, src: *const u8, n: usize) {
        /// Copies one block of 64 bytes at `at`.
        ///
        /// # Safety
        ///
        /// As for `copy_sse2`, with `at + 64 <= n`.
        #[inline(always)]
        unsafe fn block(dst: *mut u8, src: *const u8, at: usize) {
            // SAFETY: `at + 64 <= n` (the caller's), so every load and store of 16 bytes lies
            // inside the two buffers; the unaligned forms take any address.
            unsafe {
                let s = src.add(at).cast::<__m128i>();
                let d = dst.add(at).cast::<__m128i>();
                let (a, b) = (_mm_loadu_si128(s), _mm_loadu_si128(s.add(1)));
                let (c, e) = (_mm_loadu_si128(s.add(2)), _mm_loadu_si128(s.add(3)));
                _mm_storeu_si128(d, a);
                _mm_storeu_si128(d.add(1), b);
                _mm_storeu_si128(d.add(2), c);
                _mm_storeu_si128(d.add(3), e);
            }
        }
        let mut at = 0;
        while at + 64 <= n {
            // SAFETY: `at + 64 <= n`.
            unsafe { block(dst, src, at) };
            at += 64;
        }
        if at < n {
            // SAFETY: `n >= 64`, so `n - 64 + 64 <= n`.
            unsafe { block(dst, src, n - 64) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{VECTOR_MAX, VECTOR_MIN, copy};

    #[test]
    fn copies_are_exact_at_every_length_and_offset() {
        let src: Vec<u8> = (0..VECTOR_MAX + 300)
            .map(|i| (i * 7 + i / 251) as u8)
            .collect();
        let lens = [
            0,
            1,
            63,
            VECTOR_MIN - 1,
            VECTOR_MIN,
            VECTOR_MIN + 1,
            4096,
            4133,
            65_536 + 17,
            VECTOR_MAX,
            VECTOR_MAX + 1,
        ];
        for len in lens {
            for (so, d) in [(0, 0), (1, 0), (0, 3), (16, 40), (63, 1)] {
                let mut dst = vec![0xAAu8; len + 128];
                copy(&mut dst[d..d + len], &src[so..so + len]);
                assert_eq!(&dst[d..d + len], &src[so..so + len], "len {len}, {so}/{d}");
                assert!(dst[..d].iter().all(|&b| b == 0xAA), "before, len {len}");
                assert!(
                    dst[d + len..].iter().all(|&b| b == 0xAA),
                    "after, len {len}"
                );
            }
        }
    }

    #[test]
    #[should_panic(expected = "lengths differ")]
    fn unequal_lengths_panic_as_copy_from_slice_does() {
        copy(&mut [0u8; 3], &[1u8; 4]);
    }
}
