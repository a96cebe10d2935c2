//! Error codes that carry their cause: the code an MPI function returns to the program (and
//! passes to an error handler) names the error class and this very error, so that
//! `MPI_Error_string` gives what went wrong ("Invalid argument: displacement -1 is negative
//! (MPI_File_set_view)"), not only the class's text, as MPICH's codes do.
//!
//! A code is `CODE_MARK | index << 7 | class`: the class in the low 7 bits (every predefined
//! class is below 128), an index counting the errors given out in the 20 bits above, and a
//! mark bit; all below `MPI_ERR_LASTCODE` (0x3fffffff), so no user class or code is ever taken
//! for one. `MPI_Error_class` gives the class. The messages of the last [`KEPT`] codes are
//! kept; an older code's string is its class's text. `MPI_SUCCESS`, `MPI_ERR_IN_STATUS`,
//! `MPI_ERR_PENDING` (which programs compare directly, as the standard describes them) and
//! the fault-tolerance classes from 101 on are given as the bare class.

use std::collections::VecDeque;
use std::ffi::c_int;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::abi::{self, err};

/// The mark of a code that carries its cause.
const CODE_MARK: c_int = 0x1000_0000;
/// The bits of the class.
const CLASS_BITS: c_int = 0x7f;
/// The bits of the index, above the class.
const INDEX_MASK: u32 = 0xf_ffff;
/// Messages kept for `MPI_Error_string`.
const KEPT: usize = 256;

/// The messages of the last codes given out, oldest first.
static MESSAGES: Mutex<VecDeque<(c_int, String)>> = Mutex::new(VecDeque::new());
/// Errors given out so far (the next index).
static NEXT: AtomicU32 = AtomicU32::new(0);

/// The code to give the program for error `class` of function `name` with cause `message`.
pub(crate) fn code_for(class: c_int, name: &str, message: &str) -> c_int {
    let bare = class <= abi::SUCCESS
        || class >= 101
        || class == err::IN_STATUS
        || class == err::PENDING
        || !crate::error::is_valid_code(class);
    if bare {
        return class;
    }
    let index = NEXT.fetch_add(1, Ordering::Relaxed) & INDEX_MASK;
    let code = CODE_MARK | (index as c_int) << 7 | class;
    let text = format!("{}: {message} ({name})", crate::error::class_text(class));
    let mut m = MESSAGES.lock().unwrap_or_else(|e| e.into_inner());
    if m.len() == KEPT {
        m.pop_front();
    }
    m.push_back((code, text));
    code
}

/// The class of `code` when it is a code that carries its cause.
pub(crate) fn class_of(code: c_int) -> Option<c_int> {
    if code & !(CLASS_BITS | (INDEX_MASK as c_int) << 7) != CODE_MARK {
        return None;
    }
    let class = code & CLASS_BITS;
    ((1..=err::LAST_CLASS).contains(&class)).then_some(class)
}

/// What `code`, a code that carries its cause, says: the cause while it is kept, else its
/// class's text.
pub(crate) fn text_of(code: c_int) -> Option<String> {
    let class = class_of(code)?;
    let m = MESSAGES.lock().unwrap_or_else(|e| e.into_inner());
    Some(m.iter().rev().find(|(c, _)| *c == code).map_or_else(
        || crate::error::class_text(class).to_owned(),
        |(_, t)| t.clone(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_gives_its_class_and_cause() {
        let c = code_for(err::TAG, "MPI_Send", "tag -5 is negative");
        assert_ne!(c, err::TAG);
        assert!(c > err::LAST_CLASS && c <= crate::errclass::ERR_LASTCODE);
        assert_eq!(class_of(c), Some(err::TAG));
        let t = text_of(c).unwrap();
        assert!(
            t.contains("tag -5 is negative") && t.contains("MPI_Send"),
            "{t}"
        );
        assert_eq!(code_for(err::IN_STATUS, "MPI_Waitall", "x"), err::IN_STATUS);
        assert_eq!(code_for(101, "MPI_Recv", "x"), 101);
        assert_eq!(class_of(err::TAG), None);
        assert_eq!(class_of(crate::errclass::FIRST_USER), None);
    }

    #[test]
    fn an_old_code_keeps_its_class() {
        let first = code_for(err::COUNT, "MPI_Send", "count -1");
        for _ in 0..KEPT {
            code_for(err::ARG, "MPI_Send", "filler");
        }
        assert_eq!(class_of(first), Some(err::COUNT));
        assert_eq!(
            text_of(first).unwrap(),
            crate::error::class_text(err::COUNT)
        );
    }
}
