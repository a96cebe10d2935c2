//! Safe API over libibverbs (under construction).
#![deny(missing_docs)]
