//! `uring` (under construction).
