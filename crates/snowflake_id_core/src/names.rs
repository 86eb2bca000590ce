//! Sequence names as the ID hot path looks them up (docs/design.md §6): every ID finds its
//! sequence's entry in the backend's cache by comparing the caller's bytes with each name.

/// Whether two names are the same bytes, compared in line: lengths, then two words that cover
/// the name between them (overlapping unless its length is twice a word's). A sequence name is
/// short: a call of the C library's `bcmp` cost a twentieth of an ID, a loop over the bytes of
/// `'default'` a tenth.
#[inline]
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let length = a.len();
    if length != b.len() {
        return false;
    }
    match length {
        0..=3 => a.iter().zip(b).all(|(x, y)| x == y),
        4..=7 => word4(a, 0) == word4(b, 0) && word4(a, length - 4) == word4(b, length - 4),
        8..=16 => word8(a, 0) == word8(b, 0) && word8(a, length - 8) == word8(b, length - 8),
        _ => a == b,
    }
}

#[inline]
fn word4(name: &[u8], at: usize) -> u32 {
    let mut bytes = [0; 4];
    bytes.copy_from_slice(&name[at..at + 4]);
    u32::from_ne_bytes(bytes)
}

#[inline]
fn word8(name: &[u8], at: usize) -> u64 {
    let mut bytes = [0; 8];
    bytes.copy_from_slice(&name[at..at + 8]);
    u64::from_ne_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Equal exactly when the slices are, at every length up to past the words' reach,
        /// also for names that differ in one byte only (the hardest case for covering words).
        #[test]
        fn same_bytes_is_slice_equality(
            a in proptest::collection::vec(any::<u8>(), 0..24),
            position in any::<prop::sample::Index>(),
            flip in 1u8..,
        ) {
            prop_assert!(same_bytes(&a, &a.clone()));
            if !a.is_empty() {
                let mut b = a.clone();
                b[position.index(a.len())] ^= flip;
                prop_assert!(!same_bytes(&a, &b));
            }
            let longer = [a.as_slice(), b"x"].concat();
            prop_assert!(!same_bytes(&a, &longer));
        }
    }
}
