//! Wire frames of the TCP method (under construction).
