//! The compact text form of an ID (docs/design.md §6): Crockford's base32, 13 characters, most
//! significant first, always padded to full width. Its alphabet is in ASCII order, so the text
//! of IDs sorts like the IDs (byte-wise, e.g. `COLLATE "C"`). It is URL-safe and has no letters
//! that read like digits. Parsing is case-insensitive and reads O as 0 and I or L as 1, as
//! Crockford's standard says.

use std::fmt;

/// Characters in the text form: 13 × 5 = 65 bits hold 63.
pub const TEXT_LEN: usize = 13;
const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// The text is not 13 characters long.
    Length { chars: usize },
    /// A character outside the alphabet, at a 1-based position.
    Character { character: char, position: usize },
    /// 13 valid characters whose value needs more than 63 bits.
    OutOfRange,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Length { chars } => {
                write!(f, "it has {chars} characters, not {TEXT_LEN}")
            }
            ParseError::Character {
                character,
                position,
            } => write!(
                f,
                "the character \"{}\" at position {position} is not base32",
                character.escape_default()
            ),
            ParseError::OutOfRange => f.write_str("its value is above the largest bigint"),
        }
    }
}

impl std::error::Error for ParseError {}

/// The text form of a non-negative ID; None for a negative number (no ID is negative).
pub fn encode(id: i64) -> Option<String> {
    let mut value = u64::try_from(id).ok()?;
    let mut text = [b'0'; TEXT_LEN];
    for slot in text.iter_mut().rev() {
        *slot = ALPHABET[(value & 31) as usize];
        value >>= 5;
    }
    Some(text.iter().map(|&byte| char::from(byte)).collect())
}

/// The value of one character, with Crockford's aliases.
fn digit(character: char) -> Option<u64> {
    let upper = match character.to_ascii_uppercase() {
        'O' => '0',
        'I' | 'L' => '1',
        other => other,
    };
    ALPHABET
        .iter()
        .position(|&byte| char::from(byte) == upper)
        .map(|value| value as u64)
}

/// The ID a text form stands for.
pub fn parse(text: &str) -> Result<i64, ParseError> {
    let chars = text.chars().count();
    if chars != TEXT_LEN {
        return Err(ParseError::Length { chars });
    }
    let mut value: u64 = 0;
    for (index, character) in text.chars().enumerate() {
        let digit = digit(character).ok_or(ParseError::Character {
            character,
            position: index + 1,
        })?;
        // The first character holds the top 5 of 65 bits: anything above 7 overflows 63 bits.
        if index == 0 && digit > 7 {
            return Err(ParseError::OutOfRange);
        }
        value = value << 5 | digit;
    }
    i64::try_from(value).map_err(|_| ParseError::OutOfRange)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_values() {
        assert_eq!(encode(0).unwrap(), "0000000000000");
        assert_eq!(encode(31).unwrap(), "000000000000Z");
        assert_eq!(encode(32).unwrap(), "0000000000010");
        assert_eq!(encode(i64::MAX).unwrap(), "7ZZZZZZZZZZZZ");
        assert_eq!(encode(250096955256995841).unwrap(), "06Y45VC8R0001");
        assert_eq!(encode(-1), None);
        assert_eq!(encode(i64::MIN), None);
    }

    #[test]
    fn aliases_and_case() {
        assert_eq!(parse("06y45vc8r000l"), Ok(250096955256995841));
        assert_eq!(parse("O6Y45VC8RO0OI"), Ok(250096955256995841));
        assert_eq!(parse("7zzzzzzzzzzzz"), Ok(i64::MAX));
    }

    #[test]
    fn bad_text_is_named() {
        assert_eq!(parse(""), Err(ParseError::Length { chars: 0 }));
        assert_eq!(parse("06Y45VC8R000"), Err(ParseError::Length { chars: 12 }));
        assert_eq!(
            parse("06Y45VC8R00011"),
            Err(ParseError::Length { chars: 14 })
        );
        assert_eq!(
            parse("06Y45UC8R0001"),
            Err(ParseError::Character {
                character: 'U',
                position: 6
            })
        );
        assert_eq!(
            parse("06Y45-C8R0001"),
            Err(ParseError::Character {
                character: '-',
                position: 6
            })
        );
        assert_eq!(
            parse("0000000000é00").unwrap_err().to_string(),
            "the character \"\\u{e9}\" at position 11 is not base32"
        );
        assert_eq!(parse("8000000000000"), Err(ParseError::OutOfRange));
        assert_eq!(parse("ZZZZZZZZZZZZZ"), Err(ParseError::OutOfRange));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        #[test]
        fn every_id_round_trips_in_13_url_safe_characters(id in 0..=i64::MAX) {
            let text = encode(id).unwrap();
            prop_assert_eq!(text.len(), TEXT_LEN);
            prop_assert!(text.bytes().all(|b| b.is_ascii_alphanumeric()));
            prop_assert_eq!(parse(&text), Ok(id));
            prop_assert_eq!(parse(&text.to_ascii_lowercase()), Ok(id));
        }

        #[test]
        fn text_order_is_id_order(a in 0..=i64::MAX, b in 0..=i64::MAX) {
            prop_assert_eq!(encode(a).unwrap().cmp(&encode(b).unwrap()), a.cmp(&b));
        }

        #[test]
        fn any_text_parses_or_is_refused_without_panic(text in "\\PC{0,20}") {
            if let Ok(id) = parse(&text) {
                prop_assert!(id >= 0);
                prop_assert_eq!(parse(&encode(id).unwrap()), Ok(id));
            }
        }
    }
}
