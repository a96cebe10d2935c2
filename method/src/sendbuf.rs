//! [`SendBuf`]: the memory a send descriptor is posted with, owned by the method until the
//! descriptor completes.
//!
//! Either a buffer handed over ([`SendBuf::Owned`], given back in the completion) or a piece
//! of memory that the caller shares with the method ([`SendBuf::Shared`]): the method keeps a
//! reference until the descriptor completes and reads the bytes in place (the shared-memory
//! method's receiver copies a long message straight out of it), so a send needs no copy of
//! the caller's data. The caller must not change the bytes before the completion.

use std::ops::Deref;
use std::sync::Arc;

/// Bytes that a caller keeps alive and unchanged while the method reads them.
pub type SharedBytes = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// A piece `start..start + len` of [`SharedBytes`].
///
/// ```
/// use std::sync::Arc;
/// use viaduct_method::sendbuf::{SharedBytes, SharedPiece};
/// let data: SharedBytes = Arc::new(vec![1u8, 2, 3, 4]);
/// let piece = SharedPiece::new(data, 1, 2).expect("inside");
/// assert_eq!(piece.as_slice(), [2, 3]);
/// ```
#[derive(Clone)]
pub struct SharedPiece {
    data: SharedBytes,
    start: usize,
    len: usize,
}

impl SharedPiece {
    /// The piece `start..start + len` of `data`; `None` when it lies beyond `data`'s end.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use viaduct_method::sendbuf::{SharedBytes, SharedPiece};
    /// let data: SharedBytes = Arc::new(vec![0u8; 4]);
    /// assert!(SharedPiece::new(data.clone(), 2, 2).is_some());
    /// assert!(SharedPiece::new(data, 3, 2).is_none()); // beyond the end
    /// ```
    pub fn new(data: SharedBytes, start: usize, len: usize) -> Option<SharedPiece> {
        let end = start.checked_add(len)?;
        if end > (*data).as_ref().len() {
            return None;
        }
        Some(SharedPiece { data, start, len })
    }

    /// The whole of `data`.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use viaduct_method::sendbuf::SharedPiece;
    /// let piece = SharedPiece::whole(Arc::new(b"abc".to_vec()));
    /// assert_eq!(piece.as_slice(), b"abc");
    /// ```
    pub fn whole(data: SharedBytes) -> SharedPiece {
        let len = (*data).as_ref().len();
        SharedPiece {
            data,
            start: 0,
            len,
        }
    }

    /// The piece's bytes.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use viaduct_method::sendbuf::SharedPiece;
    /// let piece = SharedPiece::new(Arc::new(*b"hello"), 1, 3).expect("inside");
    /// assert_eq!(piece.as_slice(), b"ell");
    /// ```
    pub fn as_slice(&self) -> &[u8] {
        let all = (*self.data).as_ref();
        // `new` checked the bounds; an `AsRef` that shrank since gives what is left.
        let end = (self.start + self.len).min(all.len());
        &all[self.start.min(end)..end]
    }
}

impl std::fmt::Debug for SharedPiece {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedPiece({}..{})", self.start, self.start + self.len)
    }
}

/// The memory of a send descriptor.
///
/// ```
/// use std::sync::Arc;
/// use viaduct_method::sendbuf::{SendBuf, SharedPiece};
/// let owned = SendBuf::from(vec![1u8, 2]);
/// let shared = SendBuf::Shared(SharedPiece::whole(Arc::new(vec![1u8, 2])));
/// assert_eq!(&owned[..], &shared[..]);
/// ```
#[derive(Debug)]
pub enum SendBuf {
    /// A buffer handed over to the method (given back in the completion where the method
    /// keeps it).
    Owned(Vec<u8>),
    /// Memory shared with the caller, read in place until the completion.
    Shared(SharedPiece),
}

impl SendBuf {
    /// The owned buffer, if this is one (what a completion gives back).
    ///
    /// ```
    /// # use viaduct_method::sendbuf::SendBuf;
    /// assert_eq!(SendBuf::from(vec![7u8]).into_owned(), Some(vec![7]));
    /// ```
    pub fn into_owned(self) -> Option<Vec<u8>> {
        match self {
            SendBuf::Owned(v) => Some(v),
            SendBuf::Shared(_) => None,
        }
    }

    /// Whether the bytes are the caller's shared memory.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use viaduct_method::sendbuf::{SendBuf, SharedPiece};
    /// let buf = SendBuf::Shared(SharedPiece::whole(Arc::new(vec![0u8; 8])));
    /// assert!(buf.is_shared() && !SendBuf::from(vec![0u8]).is_shared());
    /// ```
    pub fn is_shared(&self) -> bool {
        matches!(self, SendBuf::Shared(_))
    }
}

impl Deref for SendBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            SendBuf::Owned(v) => v,
            SendBuf::Shared(p) => p.as_slice(),
        }
    }
}

impl From<Vec<u8>> for SendBuf {
    fn from(v: Vec<u8>) -> SendBuf {
        SendBuf::Owned(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_piece_shows_its_range_and_refuses_one_past_the_end() {
        let data: SharedBytes = Arc::new(vec![1u8, 2, 3, 4, 5]);
        let p = SharedPiece::new(data.clone(), 1, 3).unwrap();
        assert_eq!(p.as_slice(), &[2, 3, 4]);
        assert!(SharedPiece::new(data.clone(), 3, 3).is_none());
        assert!(SharedPiece::new(data.clone(), usize::MAX, 2).is_none());
        let b = SendBuf::Shared(SharedPiece::whole(data));
        assert_eq!(&b[..], &[1, 2, 3, 4, 5]);
        assert!(b.is_shared());
        assert!(b.into_owned().is_none());
        assert_eq!(SendBuf::from(vec![7]).into_owned(), Some(vec![7]));
    }
}
