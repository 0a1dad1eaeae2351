//! The spellings of a secret that tools print besides the value itself: base64
//! (standard and URL-safe, padded or not), hex (lower and upper case) and
//! percent-encoding. `echo -n "$TOKEN" | base64` in a setup script, a token in a
//! URL, a key dumped as hex: masking the exact value alone lets each of them through.
//!
//! Base64 inside a longer base64 text depends on where the secret sits: its bytes
//! start at one of three offsets of a 3-byte group, and the characters at its edges
//! mix with its neighbours' bits. So each of the three alignments gives the run of
//! characters that only the secret's bits make (at most 6 bits of it at each edge
//! stay visible), and the whole encoding of the value alone (padded and not) is
//! masked too.

/// Values shorter than this are masked as they are, not in their other spellings:
/// the encodings of a short value are short enough to occur by chance.
pub(super) const MIN_ENCODED_LEN: usize = 8;

const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// The other spellings of `value` (none when it is shorter than `MIN_ENCODED_LEN`).
pub(super) fn of(value: &str) -> Vec<String> {
    let bytes = value.as_bytes();
    if bytes.len() < MIN_ENCODED_LEN {
        return Vec::new();
    }
    let mut out = Vec::new();
    for alphabet in [STANDARD, URL_SAFE] {
        let whole = base64(bytes, alphabet);
        out.push(whole.clone());
        let padding = (3 - bytes.len() % 3) % 3;
        out.push(format!("{whole}{}", "=".repeat(padding)));
        for offset in 0..3 {
            out.push(aligned(bytes, offset, alphabet));
        }
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    out.push(hex.to_ascii_uppercase());
    out.push(hex);
    let percent = percent_encoded(bytes);
    out.push(percent.to_ascii_lowercase());
    out.push(percent);
    out.retain(|spelling| spelling != value);
    out.sort();
    out.dedup();
    out
}

/// Base64 of `bytes` without padding; the last character's missing bits are zeros.
fn base64(bytes: &[u8], alphabet: &[u8; 64]) -> String {
    let bits = bytes.len() * 8;
    (0..bits.div_ceil(6))
        .map(|i| char::from(alphabet[sextet(bytes, i * 6)]))
        .collect()
}

/// The 6 bits of `bytes` from bit `at` on (zeros past the end).
fn sextet(bytes: &[u8], at: usize) -> usize {
    let byte = |i: usize| usize::from(bytes.get(i).copied().unwrap_or(0));
    let pair = (byte(at / 8) << 8) | byte(at / 8 + 1);
    (pair >> (10 - at % 8)) & 0x3f
}

/// The characters of a base64 text that only `bytes` make when they start `offset`
/// bytes into a 3-byte group.
fn aligned(bytes: &[u8], offset: usize, alphabet: &[u8; 64]) -> String {
    let mut shifted = vec![0u8; offset];
    shifted.extend_from_slice(bytes);
    let (start, end) = (offset * 8, shifted.len() * 8);
    (start.div_ceil(6)..)
        .take_while(|i| i * 6 + 6 <= end)
        .map(|i| char::from(alphabet[sextet(&shifted, i * 6)]))
        .collect()
}

/// Every byte outside RFC 3986's unreserved characters as `%XX`.
fn percent_encoded(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 3);
    for &b in bytes {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Base64 with its padding, as `base64 -w0` writes it.
    fn standard(bytes: &[u8]) -> String {
        let whole = base64(bytes, STANDARD);
        format!("{whole}{}", "=".repeat((3 - bytes.len() % 3) % 3))
    }

    #[test]
    fn base64_matches_the_rfc_examples() {
        for (plain, encoded) in [
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(standard(plain.as_bytes()), encoded, "{plain}");
        }
        assert_eq!(base64(&[0xfb, 0xff], URL_SAFE), "-_8");
    }

    #[test]
    fn every_alignment_inside_a_longer_text_is_found() {
        let secret = b"s3cret-setup-token-0123";
        let spellings = of(std::str::from_utf8(secret).unwrap());
        for before in 0..7 {
            for after in 0..4 {
                let mut text = vec![b'x'; before];
                text.extend_from_slice(secret);
                text.extend(std::iter::repeat_n(b'y', after));
                for alphabet in [STANDARD, URL_SAFE] {
                    let encoded = base64(&text, alphabet);
                    assert!(
                        spellings
                            .iter()
                            .any(|s| s.len() >= 28 && encoded.contains(s.as_str())),
                        "{before}+{after}: {encoded}"
                    );
                }
            }
        }
    }

    #[test]
    fn hex_and_percent_encoding() {
        let spellings = of("tok/en+value 1");
        for s in [
            "746f6b2f656e2b76616c75652031",
            "746F6B2F656E2B76616C75652031",
            "tok%2Fen%2Bvalue%201",
            "tok%2fen%2bvalue%201",
            "dG9rL2VuK3ZhbHVlIDE=",
            "dG9rL2VuK3ZhbHVlIDE",
            "dG9rL2VuK3ZhbHVlIDE",
        ] {
            assert!(
                spellings.iter().any(|x| x == s),
                "{s} missing: {spellings:?}"
            );
        }
        assert!(of("short").is_empty());
        assert!(!of("plainvalue123").contains(&"plainvalue123".to_string()));
    }
}
