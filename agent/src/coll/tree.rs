//! Shapes shared by the collectives: binomial trees and the power-of-two fold.

/// Parent and children (largest subtree first) of `vr` in a binomial tree of `n` ranks rooted
/// at 0 (ranks relative to the root).
pub(crate) fn binomial(vr: u32, n: u32) -> (Option<u32>, Vec<u32>) {
    let mut mask = 1u32;
    let mut parent = None;
    while mask < n {
        if vr & mask != 0 {
            parent = Some(vr - mask);
            break;
        }
        mask <<= 1;
    }
    let mut children = Vec::new();
    let mut m = mask >> 1;
    while m > 0 {
        if vr + m < n {
            children.push(vr + m);
        }
        m >>= 1;
    }
    (parent, children)
}

/// Number of ranks in the binomial subtree of `vr` (itself included) among `n`.
pub(crate) fn subtree(vr: u32, n: u32) -> u32 {
    if vr == 0 {
        n
    } else {
        (vr & vr.wrapping_neg()).min(n - vr)
    }
}

/// Byte ranges, in real rank order, of the `count`-byte parts of the `len` ranks starting at
/// real rank `first` (wrapping past the last rank of `n`): one range, or two when it wraps.
pub(crate) fn wrapped(first: u32, len: u32, n: u32, count: usize) -> Vec<(usize, usize)> {
    let (first, len, n) = (first as usize, len as usize, n as usize);
    let end = first + len;
    if end <= n {
        vec![(first * count, end * count)]
    } else {
        vec![(first * count, n * count), (0, (end - n) * count)]
    }
}

/// The largest power of two not above `n` (n ≥ 1).
pub(crate) fn pof2(n: u32) -> u32 {
    1 << (31 - n.leading_zeros())
}

/// Rank `r` of `n` in the power-of-two fold: ranks below `2·rem` (rem = n − pof2) pair up, the
/// even one of each pair handing its data to the odd one. Returns the rank's number among the
/// pof2 ranks that stay, or `None` for a rank that hands off.
pub(crate) fn folded(r: u32, n: u32) -> Option<u32> {
    let rem = n - pof2(n);
    if r < 2 * rem {
        (r % 2 == 1).then_some(r / 2)
    } else {
        Some(r - rem)
    }
}

/// The real rank of number `nr` among the ranks that stay in the fold.
pub(crate) fn unfolded(nr: u32, n: u32) -> u32 {
    let rem = n - pof2(n);
    if nr < rem { 2 * nr + 1 } else { nr + rem }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomial_tree_covers_every_rank_once() {
        for n in 1..20u32 {
            let mut seen = vec![0; n as usize];
            for vr in 0..n {
                let (p, kids) = binomial(vr, n);
                assert_eq!(p.is_none(), vr == 0);
                for k in kids {
                    assert_eq!(binomial(k, n).0, Some(vr));
                    seen[k as usize] += 1;
                }
            }
            assert!(seen.iter().skip(1).all(|&c| c == 1));
        }
    }

    #[test]
    fn subtrees_partition_the_ranks() {
        for n in 1..20u32 {
            for vr in 0..n {
                let kids: u32 = binomial(vr, n).1.iter().map(|&c| subtree(c, n)).sum();
                assert_eq!(subtree(vr, n), kids + 1, "n {n} vr {vr}");
            }
        }
        assert_eq!(wrapped(3, 3, 5, 2), vec![(6, 10), (0, 2)]);
        assert_eq!(wrapped(1, 2, 5, 2), vec![(2, 6)]);
    }

    #[test]
    fn fold_round_trips() {
        for n in 1..20u32 {
            let p = pof2(n);
            assert!(p <= n && 2 * p > n);
            let stay: Vec<u32> = (0..n).filter_map(|r| folded(r, n)).collect();
            assert_eq!(stay, (0..p).collect::<Vec<_>>());
            for nr in 0..p {
                assert_eq!(folded(unfolded(nr, n), n), Some(nr));
            }
        }
    }
}
