//! PMI-2 wire format: a 6-character decimal length, then `cmd=NAME;key=value;...;`.
//!
//! This is what Slurm's `srun --mpi=pmi2` (and hydra, after a PMI-1 `init` asking for version 2)
//! speaks. The length counts the bytes after the prefix. MPICH writes it right-aligned (`"%6u"`),
//! Slurm left-aligned (`"%-6d"`); both are read. Fields end with `;`, so a value can hold no `;`
//! (the `;;` escape of the specification is not implemented by Slurm and is not used here).

use std::io::{self, Read};

use super::wire::{MAX_MESSAGE_LEN, Message, WireError, ascii_text, is_key_char, shorten};

/// Length of the decimal length prefix.
pub const PREFIX_LEN: usize = 6;

/// Decodes the 6-character length prefix.
///
/// ```
/// use viaduct_pmi::wire2::parse_prefix;
///
/// assert_eq!(parse_prefix(b"12    ").unwrap(), 12);
/// assert!(parse_prefix(b"abcdef").is_err());
/// ```
pub fn parse_prefix(prefix: &[u8; PREFIX_LEN]) -> Result<usize, WireError> {
    let text = std::str::from_utf8(prefix).unwrap_or("");
    let trimmed = text.trim_matches(|c| c == ' ' || c == '\0');
    let bad = || WireError::BadLength(String::from_utf8_lossy(prefix).into_owned());
    if trimmed.is_empty() || !trimmed.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let len: usize = trimmed.parse().map_err(|_| bad())?;
    if len > MAX_MESSAGE_LEN {
        return Err(WireError::TooLong {
            len,
            max: MAX_MESSAGE_LEN,
        });
    }
    Ok(len)
}

/// Decodes a record body (what follows the length prefix).
///
/// ```
/// use viaduct_pmi::wire::Message;
/// use viaduct_pmi::wire2::{PREFIX_LEN, encode_record, parse_body};
///
/// let record = encode_record(&Message::new("fence").with("k", "v")).unwrap();
/// let msg = parse_body(&record[PREFIX_LEN..]).unwrap();
/// assert_eq!(msg.get("k"), Some("v"));
/// ```
pub fn parse_body(body: &[u8]) -> Result<Message, WireError> {
    if body.len() > MAX_MESSAGE_LEN {
        return Err(WireError::TooLong {
            len: body.len(),
            max: MAX_MESSAGE_LEN,
        });
    }
    // Some servers end the record with a NUL or a newline; neither belongs to a field.
    let body = body.strip_suffix(b"\0").unwrap_or(body);
    let body = body.strip_suffix(b"\n").unwrap_or(body);
    let text = ascii_text(body)?;
    if text.is_empty() {
        return Err(WireError::Empty);
    }
    let text_fields = text.strip_suffix(';').unwrap_or(text);
    let mut fields = text_fields.split(';');
    let first = fields.next().ok_or(WireError::Empty)?;
    let cmd = match first.split_once('=') {
        Some(("cmd", name))
            if !name.is_empty() && name.bytes().all(|b| is_key_char(b) || b == b'_') =>
        {
            name
        }
        _ => return Err(WireError::NoCommand(shorten(text))),
    };
    let mut msg = Message::new(cmd);
    for field in fields {
        match field.split_once('=') {
            Some((key, value)) if !key.is_empty() && key.bytes().all(is_key_char) => {
                msg.fields.push((key.to_owned(), value.to_owned()));
            }
            _ => {
                return Err(WireError::BadField {
                    field: shorten(field),
                    message: shorten(text),
                });
            }
        }
    }
    Ok(msg)
}

/// Encodes a message as one record: prefix plus body.
///
/// Values may hold spaces but no `;` and no non-printable byte.
///
/// ```
/// use viaduct_pmi::wire::Message;
/// use viaduct_pmi::wire2::{PREFIX_LEN, encode_record, parse_prefix};
///
/// let record = encode_record(&Message::new("fence")).unwrap();
/// let len = parse_prefix(record[..PREFIX_LEN].try_into().unwrap()).unwrap();
/// assert_eq!(len, record.len() - PREFIX_LEN);
/// ```
pub fn encode_record(msg: &Message) -> Result<Vec<u8>, WireError> {
    let mut body = String::new();
    for (key, value) in std::iter::once(("cmd", msg.cmd.as_str()))
        .chain(msg.fields.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    {
        if key.is_empty() || !key.bytes().all(is_key_char) {
            return Err(WireError::BadKey {
                key: shorten(key),
                reason: "may hold only ASCII letters, digits, '_' and '-'",
            });
        }
        if value
            .bytes()
            .any(|b| b == b';' || !(b == b' ' || b.is_ascii_graphic()))
        {
            return Err(WireError::BadValue {
                value: shorten(value),
                reason: "cannot be sent in a PMI-2 record (';' or a non-printable byte)",
            });
        }
        body.push_str(key);
        body.push('=');
        body.push_str(value);
        body.push(';');
    }
    if body.len() > MAX_MESSAGE_LEN || body.len() > 999_999 {
        return Err(WireError::TooLong {
            len: body.len(),
            max: MAX_MESSAGE_LEN,
        });
    }
    let mut out = format!("{:>width$}", body.len(), width = PREFIX_LEN).into_bytes();
    out.extend_from_slice(body.as_bytes());
    Ok(out)
}

/// Reads one record. A stream closed before the prefix is `Ok(None)`; one closed inside a record
/// is `UnexpectedEof`; a bad prefix or body is `InvalidData` carrying the [`WireError`].
///
/// ```
/// use viaduct_pmi::wire::Message;
/// use viaduct_pmi::wire2::{encode_record, read_record};
///
/// let record = encode_record(&Message::new("fence")).unwrap();
/// let mut input = &record[..];
/// assert!(read_record(&mut input).unwrap().is_some());
/// assert!(read_record(&mut input).unwrap().is_none()); // closed between records
/// ```
pub fn read_record<R: Read>(reader: &mut R) -> io::Result<Option<Message>> {
    let mut prefix = [0u8; PREFIX_LEN];
    let mut got = 0;
    while got < PREFIX_LEN {
        match reader.read(&mut prefix[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "stream ended inside a PMI-2 length prefix",
                ));
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let len = parse_prefix(&prefix).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body)?;
    parse_body(&body)
        .map(Some)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_slurm_answers() {
        let m = parse_body(
            b"cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=3;size=4;appnum=-1;debugged=FALSE;pmiverbose=FALSE;",
        )
        .unwrap();
        assert_eq!(m.cmd, "fullinit-response");
        assert_eq!(m.get_int("rank"), Some(Ok(3)));
        assert_eq!(m.get_int("appnum"), Some(Ok(-1)));
        let m = parse_body(b"cmd=kvs-get-response;rc=0;found=FALSE;").unwrap();
        assert_eq!(m.get("found"), Some("FALSE"));
        let m = parse_body(b"cmd=info-getjobattr-response;rc=0;found=TRUE;value=(vector,(0,2,2));")
            .unwrap();
        assert_eq!(m.get("value"), Some("(vector,(0,2,2))"));
        // No trailing ';', a trailing NUL: both tolerated.
        assert_eq!(
            parse_body(b"cmd=kvs-fence-response;rc=0")
                .unwrap()
                .get("rc"),
            Some("0")
        );
        assert_eq!(
            parse_body(b"cmd=finalize-response;rc=0;\0").unwrap().cmd,
            "finalize-response"
        );
        // Empty values are legal.
        assert_eq!(parse_body(b"cmd=x;msg=;").unwrap().get("msg"), Some(""));
    }

    #[test]
    fn prefixes_in_both_alignments() {
        assert_eq!(parse_prefix(b"    27"), Ok(27));
        assert_eq!(parse_prefix(b"27    "), Ok(27));
        assert_eq!(parse_prefix(b"000027"), Ok(27));
        assert!(matches!(
            parse_prefix(b"      "),
            Err(WireError::BadLength(_))
        ));
        assert!(matches!(
            parse_prefix(b"cmd=in"),
            Err(WireError::BadLength(_))
        ));
        assert!(matches!(
            parse_prefix(b"-1    "),
            Err(WireError::BadLength(_))
        ));
        assert!(matches!(
            parse_prefix(b"2 7   "),
            Err(WireError::BadLength(_))
        ));
        assert!(matches!(
            parse_prefix(b"999999"),
            Err(WireError::TooLong { .. })
        ));
    }

    #[test]
    fn malformed_bodies_are_errors() {
        assert_eq!(parse_body(b""), Err(WireError::Empty));
        assert!(matches!(parse_body(b";"), Err(WireError::NoCommand(_))));
        assert!(matches!(
            parse_body(b"kvs-put;key=a;"),
            Err(WireError::NoCommand(_))
        ));
        assert!(matches!(
            parse_body(b"cmd=;key=a;"),
            Err(WireError::NoCommand(_))
        ));
        assert!(matches!(
            parse_body(b"cmd=kvs-put;;key=a;"),
            Err(WireError::BadField { .. })
        ));
        assert!(matches!(
            parse_body(b"cmd=kvs-put;keyonly;"),
            Err(WireError::BadField { .. })
        ));
        assert!(matches!(
            parse_body(b"cmd=kvs-put;k=\x7f;"),
            Err(WireError::BadByte { .. })
        ));
    }

    #[test]
    fn encodes_and_round_trips() {
        let m = Message::new("kvs-put")
            .with("key", "a")
            .with("value", "b c");
        let rec = encode_record(&m).unwrap();
        assert_eq!(rec, b"    28cmd=kvs-put;key=a;value=b c;");
        let mut input: &[u8] = &rec;
        assert_eq!(read_record(&mut input).unwrap(), Some(m));
        assert_eq!(read_record(&mut input).unwrap(), None);
        assert!(encode_record(&Message::new("kvs-put").with("value", "a;b")).is_err());
        assert!(encode_record(&Message::new("kvs-put").with("k y", "v")).is_err());
    }

    #[test]
    fn truncated_records_are_errors() {
        let mut input: &[u8] = b"    28cmd=kvs-put";
        assert_eq!(
            read_record(&mut input).unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
        let mut input: &[u8] = b"   ";
        assert_eq!(
            read_record(&mut input).unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
        let mut input: &[u8] = b"abcdefcmd=x;";
        assert_eq!(
            read_record(&mut input).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
    }

    proptest::proptest! {
        #[test]
        fn reading_any_bytes_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let _ = parse_body(&bytes);
            let mut input: &[u8] = &bytes;
            while let Ok(Some(_)) = read_record(&mut input) {}
        }

        #[test]
        fn encodable_messages_round_trip(
            cmd in "[a-z-]{1,12}",
            fields in proptest::collection::vec(("[A-Za-z0-9_-]{1,10}", "[ -:<-~]{0,20}"), 0..6),
        ) {
            let msg = Message { cmd, fields };
            let record = encode_record(&msg).unwrap();
            let mut input: &[u8] = &record;
            proptest::prop_assert_eq!(read_record(&mut input).unwrap(), Some(msg));
        }
    }
}
