//! [`MethodError`]: the error of a method, below every module that posts to one (its public
//! path is [`crate::method::MethodError`]).

use viaduct_fallback::{shm, tcp};
use viaduct_method::EndpointError;
#[cfg(feature = "rdma")]
use viaduct_verbs::msg;

/// An error of a method (carries the method's own error and errno).
///
/// ```
/// use viaduct_agent::method::MethodError;
/// use viaduct_fallback::tcp;
/// let e = MethodError::from(tcp::Error::PeerFailed("connection reset"));
/// assert!(e.to_string().starts_with("TCP method: "));
/// ```
#[derive(Debug, thiserror::Error)]
pub enum MethodError {
    /// The shared-memory method failed.
    #[error("shared-memory method: {}", crate::error::chain(.0))]
    Shm(#[from] shm::Error),
    /// The TCP method failed.
    #[error("TCP method: {}", crate::error::chain(.0))]
    Tcp(#[from] tcp::Error),
    /// The verbs method failed.
    #[cfg(feature = "rdma")]
    #[error("verbs method: {}", crate::error::chain(.0))]
    Verbs(#[from] msg::Error),
}

impl MethodError {
    /// The errno behind the error.
    ///
    /// ```
    /// # use viaduct_agent::method::MethodError;
    /// # use viaduct_fallback::tcp;
    /// let e = MethodError::from(tcp::Error::TooLong { len: 2, max: 1 });
    /// assert_eq!(e.errno(), 90); // EMSGSIZE
    /// ```
    pub fn errno(&self) -> i32 {
        match self {
            MethodError::Shm(e) => EndpointError::errno(e),
            MethodError::Tcp(e) => EndpointError::errno(e),
            #[cfg(feature = "rdma")]
            MethodError::Verbs(e) => EndpointError::errno(e),
        }
    }

    /// Whether this error reports a failed peer (as opposed to a local misuse).
    ///
    /// ```
    /// # use viaduct_agent::method::MethodError;
    /// # use viaduct_fallback::tcp;
    /// assert!(MethodError::from(tcp::Error::PeerFailed("reset")).is_peer_failure());
    /// assert!(!MethodError::from(tcp::Error::Config("bad".into())).is_peer_failure());
    /// ```
    pub fn is_peer_failure(&self) -> bool {
        match self {
            MethodError::Shm(e) => e.is_peer_failure(),
            MethodError::Tcp(e) => e.is_peer_failure(),
            #[cfg(feature = "rdma")]
            MethodError::Verbs(e) => e.is_peer_failure(),
        }
    }
}
