//! The job key: a random 256-bit secret shared by the ranks of one job, used to authenticate
//! connections between them (see [`super::auth`]).

use std::fmt;
use std::io::{self, Read};

/// Environment variable through which a launcher hands the job key to its ranks (64 hex digits).
pub const JOB_KEY_VAR: &str = "VIADUCT_JOB_KEY";

/// Length of a job key in bytes.
pub const JOB_KEY_LEN: usize = 32;

/// A job's shared secret. `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct JobKey([u8; JOB_KEY_LEN]);

impl JobKey {
    /// A new random key from the kernel's random source.
    pub fn generate() -> io::Result<Self> {
        let mut key = [0u8; JOB_KEY_LEN];
        random_bytes(&mut key)?;
        Ok(Self(key))
    }

    /// A key from its bytes.
    pub fn from_bytes(bytes: [u8; JOB_KEY_LEN]) -> Self {
        Self(bytes)
    }

    /// Reads a key written by [`JobKey::to_hex`] (64 hex digits).
    pub fn from_hex(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.len() != 2 * JOB_KEY_LEN {
            return Err(format!(
                "expected {} hex digits, got {} characters",
                2 * JOB_KEY_LEN,
                text.len()
            ));
        }
        // Hex digits only: `from_str_radix` alone would also take a sign ("+a").
        if let Some(c) = text.chars().find(|c| !c.is_ascii_hexdigit()) {
            return Err(format!("{c:?} is not a hex digit"));
        }
        let mut key = [0u8; JOB_KEY_LEN];
        for (i, byte) in key.iter_mut().enumerate() {
            let pair = text.get(2 * i..2 * i + 2).ok_or("not ASCII")?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| format!("{pair:?} is not hex"))?;
        }
        Ok(Self(key))
    }

    /// The key as 64 lowercase hex digits (what [`JOB_KEY_VAR`] holds).
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The key's bytes.
    pub fn as_bytes(&self) -> &[u8; JOB_KEY_LEN] {
        &self.0
    }
}

impl fmt::Debug for JobKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JobKey(..)")
    }
}

/// Fills `buf` from `/dev/urandom`.
pub(crate) fn random_bytes(buf: &mut [u8]) -> io::Result<()> {
    std::fs::File::open("/dev/urandom")?.read_exact(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip_and_errors() {
        let key = JobKey::generate().unwrap();
        let hex = key.to_hex();
        assert_eq!(hex.len(), 64);
        assert_eq!(JobKey::from_hex(&hex).unwrap(), key);
        assert_ne!(JobKey::generate().unwrap(), key);
        assert!(JobKey::from_hex("abc").is_err());
        assert!(JobKey::from_hex(&"zz".repeat(32)).is_err());
        assert!(JobKey::from_hex(&"\u{e9}".repeat(32)).is_err());
        assert_eq!(format!("{key:?}"), "JobKey(..)");
    }

    #[test]
    fn hex_with_signs_is_refused() {
        // `u8::from_str_radix` takes "+a" for 10: such text is not a key's hex digits.
        let signed = "+a".repeat(32);
        assert!(
            JobKey::from_hex(&signed).is_err(),
            "{signed:?} was accepted"
        );
        assert!(JobKey::from_hex(&"-0".repeat(32)).is_err());
    }
}
