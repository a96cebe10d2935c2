//! `tcp` (under construction).
