//! The job key: a random 256-bit secret shared by the ranks of one job, used to authenticate
//! connections between them (see [`super::auth`]).

use std::fmt;
use std::io;

/// Environment variable through which a launcher hands the job key to its ranks (64 hex digits).
pub const JOB_KEY_VAR: &str = "VIADUCT_JOB_KEY";

/// Length of a job key in bytes.
pub const JOB_KEY_LEN: usize = 32;

/// A job's shared secret. `Debug` does not show it.
///
/// ```
/// use viaduct_pmi::JobKey;
///
/// let key = JobKey::generate().unwrap();
/// assert!(!format!("{key:?}").contains(&key.to_hex())); // Debug hides it
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct JobKey([u8; JOB_KEY_LEN]);

impl JobKey {
    /// A new random key from the kernel's random source.
    ///
    /// ```
    /// use viaduct_pmi::JobKey;
    ///
    /// assert_ne!(JobKey::generate().unwrap(), JobKey::generate().unwrap());
    /// ```
    pub fn generate() -> io::Result<Self> {
        let mut key = [0u8; JOB_KEY_LEN];
        random_bytes(&mut key)?;
        Ok(Self(key))
    }

    /// A key from its bytes.
    ///
    /// ```
    /// use viaduct_pmi::JobKey;
    ///
    /// let key = JobKey::from_bytes([7; 32]);
    /// assert_eq!(key.as_bytes(), &[7; 32]);
    /// ```
    pub fn from_bytes(bytes: [u8; JOB_KEY_LEN]) -> Self {
        Self(bytes)
    }

    /// Reads a key written by [`JobKey::to_hex`] (64 hex digits).
    ///
    /// ```
    /// use viaduct_pmi::JobKey;
    ///
    /// let key = JobKey::generate().unwrap();
    /// assert_eq!(JobKey::from_hex(&key.to_hex()).unwrap(), key);
    /// assert!(JobKey::from_hex("abc").is_err());
    /// ```
    pub fn from_hex(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.len() != 2 * JOB_KEY_LEN {
            return Err(format!(
                "expected {} hex digits, got {} characters",
                2 * JOB_KEY_LEN,
                text.len()
            ));
        }
        let mut key = [0u8; JOB_KEY_LEN];
        hex::decode_to_slice(text, &mut key).map_err(|e| match e {
            // Named as the text holds it (a byte of a multi-byte character is not a character).
            hex::FromHexError::InvalidHexCharacter { c, index } => {
                let c = text
                    .get(index..)
                    .and_then(|t| t.chars().next())
                    .unwrap_or(c);
                format!("{c:?} is not a hex digit")
            }
            other => other.to_string(),
        })?;
        Ok(Self(key))
    }

    /// The key as 64 lowercase hex digits (what [`JOB_KEY_VAR`] holds).
    ///
    /// ```
    /// use viaduct_pmi::{JOB_KEY_VAR, JobKey};
    ///
    /// let key = JobKey::from_bytes([0xab; 32]);
    /// let var = (JOB_KEY_VAR, key.to_hex()); // for a rank's environment
    /// assert_eq!(var.1.len(), 64);
    /// ```
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The key's bytes.
    ///
    /// ```
    /// use viaduct_pmi::JobKey;
    ///
    /// assert_eq!(JobKey::from_bytes([1; 32]).as_bytes().len(), 32);
    /// ```
    pub fn as_bytes(&self) -> &[u8; JOB_KEY_LEN] {
        &self.0
    }
}

impl fmt::Debug for JobKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JobKey(..)")
    }
}

/// Fills `buf` from the kernel's random source (`getrandom(2)`): what job keys and handshake
/// nonces are drawn from.
///
/// ```
/// let mut nonce = [0u8; 16];
/// viaduct_pmi::jobkey::random_bytes(&mut nonce).unwrap();
/// ```
pub fn random_bytes(buf: &mut [u8]) -> io::Result<()> {
    getrandom::fill(buf).map_err(io::Error::from)
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
        let err = JobKey::from_hex(&format!("{}\u{e9}", "0".repeat(62))).unwrap_err();
        assert_eq!(err, "'\u{e9}' is not a hex digit");
        assert_eq!(format!("{key:?}"), "JobKey(..)");
    }

    #[test]
    fn hex_with_signs_is_refused() {
        // `u8::from_str_radix` would take "+a" for 10: such text is not a key's hex digits.
        let signed = "+a".repeat(32);
        assert!(
            JobKey::from_hex(&signed).is_err(),
            "{signed:?} was accepted"
        );
        assert!(JobKey::from_hex(&"-0".repeat(32)).is_err());
    }
}
