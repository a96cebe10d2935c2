//! [`SendBuf`]: the memory a send descriptor is posted with, owned by the method until the
//! descriptor completes. The type lives in `viaduct-method`, shared by every method; it is
//! named here too so that existing paths keep working.

pub use viaduct_method::sendbuf::{SendBuf, SharedBytes, SharedPiece};
