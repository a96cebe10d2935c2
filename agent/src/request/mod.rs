//! Requests (under construction).
