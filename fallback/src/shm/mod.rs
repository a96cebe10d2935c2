//! `shm` (under construction).
