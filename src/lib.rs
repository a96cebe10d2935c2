//! viaduct facade.
#![deny(missing_docs)]
pub use viaduct_agent as agent;
pub use viaduct_fallback as fallback;
#[cfg(feature = "rdma")]
pub use viaduct_verbs as verbs;
