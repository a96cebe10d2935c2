//! Connection authentication: both ends prove they hold the job key before any data flows.
//!
//! A challenge-response with HMAC-SHA256 keyed by the [`JobKey`]; the key itself never travels.
//!
//! ```text
//! acceptor  -> connector : "VDAUTH01" nonce_a(32)
//! connector -> acceptor  : "VDAUTH01" rank(4, big-endian) nonce_c(32)
//!                          HMAC(key, "connector" | nonce_a | nonce_c | rank)
//! acceptor  -> connector : HMAC(key, "acceptor" | nonce_a | nonce_c | rank)
//! ```
//!
//! Strength, stated plainly: a peer without the key cannot produce a valid proof (HMAC-SHA256),
//! a recorded exchange cannot be replayed (fresh 256-bit nonces from the kernel's random source on both
//! sides), and the connector learns that the acceptor holds the key too. It does **not** encrypt
//! or authenticate the traffic that follows: someone able to hijack an established TCP
//! connection can still inject data. It is a guard against strangers and stale jobs reaching a
//! port, not a secure channel.
//!
//! Both functions read and write with the stream's own timeouts: set read and write timeouts on
//! the socket first, or a silent peer blocks the handshake.

use std::io::{self, Read, Write};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::jobkey::{JobKey, random_bytes};

const MAGIC: &[u8; 8] = b"VDAUTH01";
const NONCE_LEN: usize = 32;
const PROOF_LEN: usize = 32;

/// Why a handshake failed.
///
/// ```
/// use std::os::unix::net::UnixStream;
/// use viaduct_pmi::JobKey;
/// use viaduct_pmi::auth::{accept, connect};
///
/// let key = JobKey::generate().unwrap();
/// let (mut a, mut b) = UnixStream::pair().unwrap();
/// let k = key.clone();
/// let peer = std::thread::spawn(move || connect(&mut b, &k, 3));
/// let other = JobKey::generate().unwrap(); // not the job's key
/// let refused = accept(&mut a, &other, "test peer");
/// assert!(refused.is_err());
/// drop(a); // the connector then sees the connection end
/// assert!(peer.join().unwrap().is_err());
/// ```
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// Reading or writing the stream failed (including a timeout or the peer closing it).
    #[error("authentication handshake: I/O error: {}", crate::error::chain(.0))]
    Io(#[source] io::Error),
    /// The random source could not be read.
    #[error(
        "authentication handshake: cannot read random bytes: {}",
        crate::error::chain(.0)
    )]
    Random(#[source] io::Error),
    /// The peer does not speak this handshake.
    #[error("authentication handshake: the peer does not speak viaduct's handshake")]
    BadMagic,
    /// The connecting peer's proof is wrong: it does not hold this job's key.
    #[error(
        "authentication handshake: the connecting peer (claiming rank {claimed_rank}) does not hold this job's key"
    )]
    StrangerConnector {
        /// The rank the peer claimed.
        claimed_rank: u32,
    },
    /// The accepting peer's proof is wrong or missing: it is not part of this job.
    #[error(
        "authentication handshake: the accepting peer does not hold this job's key (or refused ours)"
    )]
    StrangerAcceptor,
}

fn proof(key: &JobKey, label: &[u8], nonce_a: &[u8], nonce_c: &[u8], rank: u32) -> [u8; PROOF_LEN] {
    let mut mac =
        <Hmac<Sha256> as Mac>::new_from_slice(key.as_bytes()).expect("HMAC accepts any key length");
    mac.update(label);
    mac.update(nonce_a);
    mac.update(nonce_c);
    mac.update(&rank.to_be_bytes());
    mac.finalize().into_bytes().into()
}

/// Compares without stopping at the first difference.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Connector side: proves to the acceptor that this process (rank `my_rank`) holds `key`, and
/// checks the acceptor holds it too.
///
/// ```
/// use std::os::unix::net::UnixStream;
/// use viaduct_pmi::JobKey;
/// use viaduct_pmi::auth::{accept, connect};
///
/// let key = JobKey::generate().unwrap();
/// let (mut a, mut b) = UnixStream::pair().unwrap();
/// let k = key.clone();
/// let peer = std::thread::spawn(move || connect(&mut b, &k, 3));
/// assert_eq!(accept(&mut a, &key, "test peer").unwrap(), 3); // the rank it proved
/// peer.join().unwrap().unwrap();
/// ```
pub fn connect<S: Read + Write>(
    stream: &mut S,
    key: &JobKey,
    my_rank: u32,
) -> Result<(), AuthError> {
    let mut hello = [0u8; 8 + NONCE_LEN];
    stream.read_exact(&mut hello).map_err(AuthError::Io)?;
    if &hello[..8] != MAGIC {
        return Err(AuthError::BadMagic);
    }
    let nonce_a = &hello[8..];
    let mut nonce_c = [0u8; NONCE_LEN];
    random_bytes(&mut nonce_c).map_err(AuthError::Random)?;
    let mine = proof(key, b"connector", nonce_a, &nonce_c, my_rank);
    let mut reply = Vec::with_capacity(8 + 4 + NONCE_LEN + PROOF_LEN);
    reply.extend_from_slice(MAGIC);
    reply.extend_from_slice(&my_rank.to_be_bytes());
    reply.extend_from_slice(&nonce_c);
    reply.extend_from_slice(&mine);
    stream
        .write_all(&reply)
        .and_then(|()| stream.flush())
        .map_err(AuthError::Io)?;
    let mut theirs = [0u8; PROOF_LEN];
    match stream.read_exact(&mut theirs) {
        Ok(()) => {}
        // The acceptor closes the connection when it refuses our proof.
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
            return Err(AuthError::StrangerAcceptor);
        }
        Err(e) => return Err(AuthError::Io(e)),
    }
    let expected = proof(key, b"acceptor", nonce_a, &nonce_c, my_rank);
    if same(&theirs, &expected) {
        Ok(())
    } else {
        Err(AuthError::StrangerAcceptor)
    }
}

/// Acceptor side: challenges the connecting peer, and returns the rank it proved to be, or
/// refuses it. Every refusal is reported to `log` with `peer` (e.g. its address) before the
/// error is returned; the caller then drops the connection.
///
/// ```
/// use std::os::unix::net::UnixStream;
/// use viaduct_pmi::JobKey;
/// use viaduct_pmi::auth::{accept_with_log, connect};
///
/// let key = JobKey::generate().unwrap();
/// let (mut a, mut b) = UnixStream::pair().unwrap();
/// let k = key.clone();
/// let peer = std::thread::spawn(move || connect(&mut b, &k, 3));
/// let mut refusals = Vec::new();
/// let rank = accept_with_log(&mut a, &key, "test peer", &mut |line| refusals.push(line.to_owned()));
/// assert_eq!(rank.unwrap(), 3);
/// assert!(refusals.is_empty());
/// peer.join().unwrap().unwrap();
/// ```
pub fn accept_with_log<S: Read + Write>(
    stream: &mut S,
    key: &JobKey,
    peer: &str,
    log: &mut dyn FnMut(&str),
) -> Result<u32, AuthError> {
    let result = accept_inner(stream, key);
    if let Err(e) = &result {
        log(&format!("viaduct: refused connection from {peer}: {e}"));
    }
    result
}

/// [`accept_with_log`] reporting refusals as [`tracing`] warnings (shown by the subscriber the
/// program installs).
///
/// ```
/// use std::os::unix::net::UnixStream;
/// use viaduct_pmi::JobKey;
/// use viaduct_pmi::auth::{accept, connect};
///
/// let key = JobKey::generate().unwrap();
/// let (mut a, mut b) = UnixStream::pair().unwrap();
/// let k = key.clone();
/// let peer = std::thread::spawn(move || connect(&mut b, &k, 3));
/// let rank = accept(&mut a, &key, "test peer").unwrap();
/// assert_eq!(rank, 3);
/// peer.join().unwrap().unwrap();
/// ```
pub fn accept<S: Read + Write>(stream: &mut S, key: &JobKey, peer: &str) -> Result<u32, AuthError> {
    accept_with_log(stream, key, peer, &mut |line| tracing::warn!("{line}"))
}

fn accept_inner<S: Read + Write>(stream: &mut S, key: &JobKey) -> Result<u32, AuthError> {
    let mut nonce_a = [0u8; NONCE_LEN];
    random_bytes(&mut nonce_a).map_err(AuthError::Random)?;
    let mut hello = Vec::with_capacity(8 + NONCE_LEN);
    hello.extend_from_slice(MAGIC);
    hello.extend_from_slice(&nonce_a);
    stream
        .write_all(&hello)
        .and_then(|()| stream.flush())
        .map_err(AuthError::Io)?;
    let mut reply = [0u8; 8 + 4 + NONCE_LEN + PROOF_LEN];
    stream.read_exact(&mut reply).map_err(AuthError::Io)?;
    if &reply[..8] != MAGIC {
        return Err(AuthError::BadMagic);
    }
    let rank = u32::from_be_bytes([reply[8], reply[9], reply[10], reply[11]]);
    let nonce_c = &reply[12..12 + NONCE_LEN];
    let theirs = &reply[12 + NONCE_LEN..];
    if !same(theirs, &proof(key, b"connector", &nonce_a, nonce_c, rank)) {
        return Err(AuthError::StrangerConnector { claimed_rank: rank });
    }
    let mine = proof(key, b"acceptor", &nonce_a, nonce_c, rank);
    stream
        .write_all(&mine)
        .and_then(|()| stream.flush())
        .map_err(AuthError::Io)?;
    Ok(rank)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_depend_on_every_input() {
        let k1 = JobKey::from_bytes([1; 32]);
        let k2 = JobKey::from_bytes([2; 32]);
        let base = proof(&k1, b"connector", &[0; 32], &[0; 32], 0);
        assert_ne!(base, proof(&k2, b"connector", &[0; 32], &[0; 32], 0));
        assert_ne!(base, proof(&k1, b"acceptor", &[0; 32], &[0; 32], 0));
        assert_ne!(base, proof(&k1, b"connector", &[1; 32], &[0; 32], 0));
        assert_ne!(base, proof(&k1, b"connector", &[0; 32], &[1; 32], 0));
        assert_ne!(base, proof(&k1, b"connector", &[0; 32], &[0; 32], 1));
        assert!(same(&base, &base));
        assert!(!same(&base, &base[..31]));
    }
}
