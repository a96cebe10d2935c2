//! The verbs method's business card, decoded from the hex text a peer published in the PMI
//! key-value space (and from raw bytes).
//!
//! Checks: nothing panics; a decoded card survives its own encoding; text accepted as hex is
//! hex digits only.
#![no_main]

use libfuzzer_sys::fuzz_target;
use viaduct_verbs::msg::Card;

fuzz_target!(|data: &[u8]| {
    if let Ok(card) = Card::from_bytes(data) {
        assert_eq!(Card::from_bytes(&card.to_bytes()).ok(), Some(card));
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(card) = Card::from_hex(text) {
        assert!(
            text.trim().bytes().all(|b| b.is_ascii_hexdigit()),
            "a card decoded from {text:?}, which is not hex digits"
        );
        assert_eq!(Card::from_hex(&card.to_hex()).ok(), Some(card));
    }
});
