//! `X-Agent-Runner-Signature: sha256=<hex>`: the HMAC-SHA256 of the body with the
//! webhook's key, so a receiver knows the POST is ours and unchanged.

use ring::hmac;

/// The header's name.
pub(crate) const HEADER: &str = "X-Agent-Runner-Signature";

/// The header's value for `body` signed with `key`.
pub(crate) fn sign(key: &[u8], body: &[u8]) -> String {
    let tag = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), body);
    let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4231 test case 2.
    #[test]
    fn the_signature_is_rfc_4231_s_hmac_sha256() {
        assert_eq!(
            sign(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
