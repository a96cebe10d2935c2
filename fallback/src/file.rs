//! File operations on the io_uring engine (under construction).
