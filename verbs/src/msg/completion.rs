//! What posting answers and what completes: the shared vocabulary of `viaduct-method`, with
//! this method's error.

use super::error::Error;
pub use viaduct_method::{Message, Op, Posted};

/// The one completion of an accepted descriptor: its id, what it asked for, bytes moved or why
/// it failed. Verbs copies a send into registered memory, so [`Completion::buffer`] is `None`
/// (see [`viaduct_method::Attrs::returns_buffers`]).
///
/// [`Completion::buffer`]: viaduct_method::Completion::buffer
pub type Completion = viaduct_method::Completion<Error>;
