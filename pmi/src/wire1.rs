//! PMI-1 wire format: one message per line, `cmd=NAME key=value key=value\n`.
//!
//! This is what MPICH's hydra (`mpiexec`) speaks over `PMI_FD` or `PMI_PORT`, and what
//! `viaduct launch` serves. Fields are separated by one or more spaces, so a value can hold no
//! space; a value runs from the first `=` of its field to the next space.

use std::io::{self, BufRead};

use super::wire::{MAX_MESSAGE_LEN, Message, WireError, ascii_text, is_key_char, shorten};

/// Decodes one line (with or without its trailing `\n`).
///
/// ```
/// use viaduct_pmi::wire1::parse_line;
///
/// let msg = parse_line(b"cmd=get kvsname=j key=k\n").unwrap();
/// assert_eq!(msg.get("key"), Some("k"));
/// ```
pub fn parse_line(line: &[u8]) -> Result<Message, WireError> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.len() > MAX_MESSAGE_LEN {
        return Err(WireError::TooLong {
            len: line.len(),
            max: MAX_MESSAGE_LEN,
        });
    }
    let text = ascii_text(line)?;
    let mut tokens = text.split(' ').filter(|t| !t.is_empty());
    let first = tokens.next().ok_or(WireError::Empty)?;
    let cmd = match first.split_once('=') {
        Some(("cmd", name)) if !name.is_empty() && name.bytes().all(is_key_char) => name,
        _ => return Err(WireError::NoCommand(shorten(text))),
    };
    let mut msg = Message::new(cmd);
    for token in tokens {
        match token.split_once('=') {
            Some((key, value)) if !key.is_empty() && key.bytes().all(is_key_char) => {
                msg.fields.push((key.to_owned(), value.to_owned()));
            }
            _ => {
                return Err(WireError::BadField {
                    field: shorten(token),
                    message: shorten(text),
                });
            }
        }
    }
    Ok(msg)
}

/// Encodes a message as one line, ending in `\n`.
///
/// Refuses keys outside `[A-Za-z0-9_-]` and values that are empty or hold a space or a
/// non-printable byte, since the line could not be read back as sent.
///
/// ```
/// use viaduct_pmi::wire::Message;
/// use viaduct_pmi::wire1::{encode_line, parse_line};
///
/// let line = encode_line(&Message::new("barrier_in")).unwrap();
/// assert!(line.ends_with(b"\n"));
/// assert!(parse_line(&line).is_ok());
/// ```
pub fn encode_line(msg: &Message) -> Result<Vec<u8>, WireError> {
    check_wire_key(&msg.cmd)?;
    let mut out = format!("cmd={}", msg.cmd);
    for (key, value) in &msg.fields {
        check_wire_key(key)?;
        if value.is_empty() || !value.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(WireError::BadValue {
                value: shorten(value),
                reason: "cannot be sent on a PMI-1 line (empty, a space or a non-printable byte)",
            });
        }
        out.push(' ');
        out.push_str(key);
        out.push('=');
        out.push_str(value);
    }
    out.push('\n');
    if out.len() > MAX_MESSAGE_LEN {
        return Err(WireError::TooLong {
            len: out.len(),
            max: MAX_MESSAGE_LEN,
        });
    }
    Ok(out.into_bytes())
}

fn check_wire_key(key: &str) -> Result<(), WireError> {
    if key.is_empty() || !key.bytes().all(is_key_char) {
        return Err(WireError::BadKey {
            key: shorten(key),
            reason: "may hold only ASCII letters, digits, '_' and '-'",
        });
    }
    Ok(())
}

/// Result of reading one line.
///
/// ```
/// use viaduct_pmi::wire1::{LineRead, read_line};
///
/// let mut input: &[u8] = b"cmd=barrier_out\n";
/// let mut partial = Vec::new();
/// assert_eq!(read_line(&mut input, &mut partial).unwrap(), LineRead::Line(b"cmd=barrier_out".to_vec()));
/// assert_eq!(read_line(&mut input, &mut partial).unwrap(), LineRead::Eof);
/// ```
#[derive(Debug, PartialEq, Eq)]
pub enum LineRead {
    /// A whole line (without its `\n`) was read.
    Line(Vec<u8>),
    /// The peer closed the stream at a line boundary.
    Eof,
}

/// Reads one line of at most [`MAX_MESSAGE_LEN`] bytes.
///
/// Bytes already read stay in `partial` when the read fails (for example on a read timeout), so
/// calling again with the same `partial` continues the same line. A line that grows past the limit
/// is an `InvalidData` error; a stream that ends in the middle of a line is `UnexpectedEof`.
///
/// ```
/// use viaduct_pmi::wire1::{LineRead, read_line};
///
/// let mut input: &[u8] = b"cmd=get key=a\n";
/// let mut partial = Vec::new();
/// let LineRead::Line(line) = read_line(&mut input, &mut partial).unwrap() else { panic!() };
/// assert_eq!(line, b"cmd=get key=a");
/// ```
pub fn read_line<R: BufRead>(reader: &mut R, partial: &mut Vec<u8>) -> io::Result<LineRead> {
    loop {
        let available = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            if partial.is_empty() {
                return Ok(LineRead::Eof);
            }
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "stream ended in the middle of a PMI line",
            ));
        }
        let (used, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (available.len(), false),
        };
        let chunk = if done {
            &available[..used - 1]
        } else {
            available
        };
        if partial.len() + chunk.len() > MAX_MESSAGE_LEN {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("PMI line longer than {MAX_MESSAGE_LEN} bytes"),
            ));
        }
        partial.extend_from_slice(chunk);
        reader.consume(used);
        if done {
            return Ok(LineRead::Line(std::mem::take(partial)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hydra_answers() {
        let m = parse_line(b"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n").unwrap();
        assert_eq!(m.cmd, "response_to_init");
        assert_eq!(m.get("rc"), Some("0"));
        assert_eq!(m.get_int("pmi_version"), Some(Ok(1)));
        let m = parse_line(b"cmd=get_result rc=0 msg=success value=(vector,(0,1,4))").unwrap();
        assert_eq!(m.get("value"), Some("(vector,(0,1,4))"));
        let m = parse_line(b"cmd=barrier_out").unwrap();
        assert!(m.fields.is_empty());
        let m = parse_line(b"cmd=put  key=a   value=b=c\r\n").unwrap();
        assert_eq!(m.get("value"), Some("b=c"));
        assert_eq!(m.get("key"), Some("a"));
    }

    #[test]
    fn malformed_lines_are_errors() {
        assert_eq!(parse_line(b""), Err(WireError::Empty));
        assert_eq!(parse_line(b"   \n"), Err(WireError::Empty));
        assert!(matches!(
            parse_line(b"put key=a"),
            Err(WireError::NoCommand(_))
        ));
        assert!(matches!(
            parse_line(b"cmd= key=a"),
            Err(WireError::NoCommand(_))
        ));
        assert!(matches!(
            parse_line(b"key=a cmd=put"),
            Err(WireError::NoCommand(_))
        ));
        assert!(matches!(
            parse_line(b"cmd=put flag"),
            Err(WireError::BadField { .. })
        ));
        assert!(matches!(
            parse_line(b"cmd=put =v"),
            Err(WireError::BadField { .. })
        ));
        assert!(matches!(
            parse_line(b"cmd=put k;x=v"),
            Err(WireError::BadField { .. })
        ));
        assert!(matches!(
            parse_line(b"cmd=put k=\x01"),
            Err(WireError::BadByte { .. })
        ));
        assert!(matches!(
            parse_line(b"cmd=put\tk=v"),
            Err(WireError::BadByte { .. })
        ));
        assert!(matches!(
            parse_line(&[b'a'; MAX_MESSAGE_LEN + 1]),
            Err(WireError::TooLong { .. })
        ));
        assert!(matches!(
            parse_line(b"cmd=\xc3\xa9"),
            Err(WireError::BadByte { .. })
        ));
    }

    #[test]
    fn encodes_and_round_trips() {
        let m = Message::new("put")
            .with("kvsname", "kvs_1")
            .with("key", "card-3")
            .with("value", "tcp:127.0.0.1:4000");
        let line = encode_line(&m).unwrap();
        assert_eq!(
            line,
            b"cmd=put kvsname=kvs_1 key=card-3 value=tcp:127.0.0.1:4000\n"
        );
        assert_eq!(parse_line(&line).unwrap(), m);
    }

    #[test]
    fn encoder_refuses_what_cannot_be_read_back() {
        assert!(encode_line(&Message::new("put").with("key", "a b")).is_err());
        assert!(encode_line(&Message::new("put").with("k", "")).is_err());
        assert!(encode_line(&Message::new("put").with("k", "x\ny")).is_err());
        assert!(encode_line(&Message::new("pu t")).is_err());
        assert!(encode_line(&Message::new("put").with("k=", "v")).is_err());
        let huge = "x".repeat(MAX_MESSAGE_LEN);
        assert!(matches!(
            encode_line(&Message::new("put").with("v", huge)),
            Err(WireError::TooLong { .. })
        ));
    }

    #[test]
    fn reads_lines_and_bounds_them() {
        let mut input: &[u8] = b"cmd=a\ncmd=b x=1\npartial";
        let mut partial = Vec::new();
        assert_eq!(
            read_line(&mut input, &mut partial).unwrap(),
            LineRead::Line(b"cmd=a".to_vec())
        );
        assert_eq!(
            read_line(&mut input, &mut partial).unwrap(),
            LineRead::Line(b"cmd=b x=1".to_vec())
        );
        let err = read_line(&mut input, &mut partial).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);

        let mut empty: &[u8] = b"";
        assert_eq!(
            read_line(&mut empty, &mut Vec::new()).unwrap(),
            LineRead::Eof
        );

        let long = vec![b'x'; MAX_MESSAGE_LEN + 10];
        let mut input: &[u8] = &long;
        let err = read_line(&mut input, &mut Vec::new()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }

    proptest::proptest! {
        #[test]
        fn parsing_any_bytes_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let _ = parse_line(&bytes);
            let mut input: &[u8] = &bytes;
            let mut partial = Vec::new();
            while let Ok(LineRead::Line(_)) = read_line(&mut input, &mut partial) {}
        }

        #[test]
        fn encodable_messages_round_trip(
            cmd in "[a-z_]{1,12}",
            fields in proptest::collection::vec(("[A-Za-z0-9_-]{1,10}", "[!-~]{1,20}"), 0..6),
        ) {
            let msg = Message { cmd, fields };
            let line = encode_line(&msg).unwrap();
            proptest::prop_assert_eq!(parse_line(&line).unwrap(), msg);
        }
    }
}
