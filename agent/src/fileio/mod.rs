//! Nonblocking file I/O (under construction).
