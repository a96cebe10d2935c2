//! The message both PMI wire formats carry: a command name and ordered `key=value` fields.
//!
//! PMI-1 writes it as one line (`cmd=put kvsname=K key=A value=B\n`, see [`super::wire1`]),
//! PMI-2 as a length-prefixed record (`    27cmd=kvs-put;key=A;value=B;`, see
//! [`super::wire2`]). Neither format has a working escape that every server honours (MPICH's
//! newest parser knows `\` in PMI-1, Slurm knows none), so the encoders refuse what a server could
//! misread instead of escaping it: keys are `[A-Za-z0-9_-]`, values are printable ASCII without
//! space, `=`, `;` or `\`. Binary data (business cards) is hex-encoded by the caller.

/// Longest PMI-1 line or PMI-2 record read or written. Servers use far less (hydra and Slurm
/// cap values at 1 KiB); the limit only keeps a misbehaving peer from filling memory.
pub const MAX_MESSAGE_LEN: usize = 64 * 1024;

/// Why a PMI message could not be decoded or encoded.
///
/// ```
/// use viaduct_pmi::wire::check_key;
///
/// let e = check_key("a key").unwrap_err(); // a space
/// println!("{e}");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The message is empty.
    #[error("empty PMI message")]
    Empty,
    /// The message does not start with `cmd=NAME`.
    #[error("PMI message does not start with cmd=NAME: {0:?}")]
    NoCommand(String),
    /// A field is not `key=value`.
    #[error("PMI field {field:?} is not key=value in {message:?}")]
    BadField {
        /// The field.
        field: String,
        /// The whole message (shortened).
        message: String,
    },
    /// The message is not ASCII text, or holds control characters.
    #[error("PMI message holds a byte that is not printable ASCII (0x{byte:02x} at {at})")]
    BadByte {
        /// The byte.
        byte: u8,
        /// Its offset.
        at: usize,
    },
    /// The message is longer than [`MAX_MESSAGE_LEN`].
    #[error("PMI message of {len} bytes exceeds the limit of {max}")]
    TooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The PMI-2 length prefix is not a decimal number.
    #[error("PMI-2 length prefix {0:?} is not a decimal number")]
    BadLength(String),
    /// A key cannot be carried by the wire format.
    #[error("key {key:?}: {reason}")]
    BadKey {
        /// The key (shortened).
        key: String,
        /// Why.
        reason: &'static str,
    },
    /// A value cannot be carried by the wire format.
    #[error("value {value:?}: {reason}")]
    BadValue {
        /// The value (shortened).
        value: String,
        /// Why.
        reason: &'static str,
    },
}

/// One PMI message: the command and its fields in order (order matters for a few commands).
///
/// ```
/// use viaduct_pmi::wire::Message;
///
/// let msg = Message::new("put").with("kvsname", "job1").with("key", "k").with("value", "v");
/// assert_eq!(msg.get("key"), Some("k"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The command name, the value of the leading `cmd=`.
    pub cmd: String,
    /// The other fields, in wire order.
    pub fields: Vec<(String, String)>,
}

impl Message {
    /// A message with no fields.
    ///
    /// ```
    /// use viaduct_pmi::wire::Message;
    ///
    /// let barrier = Message::new("barrier_in");
    /// assert_eq!(barrier.get("cmd"), None);
    /// ```
    pub fn new(cmd: &str) -> Self {
        Self {
            cmd: cmd.to_owned(),
            fields: Vec::new(),
        }
    }

    /// Appends a field.
    ///
    /// ```
    /// use viaduct_pmi::wire::Message;
    ///
    /// let msg = Message::new("get").with("key", "card-0");
    /// assert_eq!(msg.get("key"), Some("card-0"));
    /// ```
    #[must_use]
    pub fn with(mut self, key: &str, value: impl ToString) -> Self {
        self.fields.push((key.to_owned(), value.to_string()));
        self
    }

    /// The value of the first field named `key`.
    ///
    /// ```
    /// use viaduct_pmi::wire::Message;
    ///
    /// let msg = Message::new("m").with("a", 1).with("a", 2);
    /// assert_eq!(msg.get("a"), Some("1")); // the first one
    /// ```
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The field `key` parsed as an integer.
    ///
    /// ```
    /// use viaduct_pmi::wire::Message;
    ///
    /// let msg = Message::new("m").with("rank", 3).with("name", "x");
    /// assert_eq!(msg.get_int("rank"), Some(Ok(3)));
    /// assert!(matches!(msg.get_int("name"), Some(Err(_))));
    /// assert_eq!(msg.get_int("size"), None);
    /// ```
    pub fn get_int(&self, key: &str) -> Option<Result<i64, String>> {
        self.get(key)
            .map(|v| v.trim().parse::<i64>().map_err(|_| v.to_owned()))
    }
}

/// Shortens text for error messages.
pub(crate) fn shorten(text: &str) -> String {
    const MAX: usize = 80;
    if text.len() <= MAX {
        text.to_owned()
    } else {
        let mut end = MAX;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...", &text[..end])
    }
}

/// Whether `c` may appear in a key: `[A-Za-z0-9_-]`.
///
/// ```
/// use viaduct_pmi::wire::is_key_char;
///
/// assert!(is_key_char(b'a') && is_key_char(b'-'));
/// assert!(!is_key_char(b'='));
/// ```
pub fn is_key_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

/// Whether `c` may appear in a value: printable ASCII except space, `=`, `;` and `\`.
///
/// ```
/// use viaduct_pmi::wire::is_value_char;
///
/// assert!(is_value_char(b':'));
/// assert!(!is_value_char(b' ') && !is_value_char(b';'));
/// ```
pub fn is_value_char(c: u8) -> bool {
    c.is_ascii_graphic() && !matches!(c, b'=' | b';' | b'\\')
}

/// Checks that a key can be sent on both wire formats.
///
/// ```
/// use viaduct_pmi::wire::check_key;
///
/// assert!(check_key("card-3").is_ok());
/// assert!(check_key("card=3").is_err());
/// ```
pub fn check_key(key: &str) -> Result<(), WireError> {
    let bad = |reason| {
        Err(WireError::BadKey {
            key: shorten(key),
            reason,
        })
    };
    if key.is_empty() {
        return bad("is empty");
    }
    if !key.bytes().all(is_key_char) {
        return bad("may hold only ASCII letters, digits, '_' and '-'");
    }
    Ok(())
}

/// Checks that a value can be sent on both wire formats.
///
/// ```
/// use viaduct_pmi::wire::check_value;
///
/// assert!(check_value("10.0.0.1:4000").is_ok());
/// assert!(check_value("two words").is_err());
/// ```
pub fn check_value(value: &str) -> Result<(), WireError> {
    let bad = |reason| {
        Err(WireError::BadValue {
            value: shorten(value),
            reason,
        })
    };
    if value.is_empty() {
        return bad("is empty (PMI servers cannot store an empty value)");
    }
    if !value.bytes().all(is_value_char) {
        return bad("may hold only printable ASCII without space, '=', ';' or '\\'");
    }
    Ok(())
}

/// Checks a message is printable ASCII (spaces allowed) and turns it into text.
pub(crate) fn ascii_text(bytes: &[u8]) -> Result<&str, WireError> {
    if let Some(at) = bytes
        .iter()
        .position(|&b| !(b == b' ' || b.is_ascii_graphic()))
    {
        return Err(WireError::BadByte {
            byte: bytes[at],
            at,
        });
    }
    // Printable ASCII is valid UTF-8.
    std::str::from_utf8(bytes).map_err(|e| WireError::BadByte {
        byte: bytes[e.valid_up_to()],
        at: e.valid_up_to(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_are_checked() {
        assert!(check_key("viaduct-card-12").is_ok());
        assert!(check_key("").is_err());
        assert!(check_key("a b").is_err());
        assert!(check_key("a=b").is_err());
        assert!(check_key("a;b").is_err());
        assert!(check_value("tcp:127.0.0.1:5000,qpn/0x1f").is_ok());
        assert!(check_value("").is_err());
        assert!(check_value("two words").is_err());
        assert!(check_value("a;b").is_err());
        assert!(check_value("a=b").is_err());
        assert!(check_value("line\n").is_err());
        assert!(check_value("caf\u{e9}").is_err());
    }

    #[test]
    fn ascii_text_refuses_control_bytes() {
        assert_eq!(ascii_text(b"cmd=x y=z").unwrap(), "cmd=x y=z");
        assert!(matches!(
            ascii_text(b"cmd=x\0"),
            Err(WireError::BadByte { byte: 0, at: 5 })
        ));
        assert!(ascii_text(&[0xff]).is_err());
    }

    #[test]
    fn shorten_keeps_char_boundaries() {
        let long = "\u{e9}".repeat(100);
        assert!(shorten(&long).ends_with("..."));
    }
}
