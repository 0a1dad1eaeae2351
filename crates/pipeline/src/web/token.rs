//! The per-process token that every state-changing request must carry (header
//! `X-Agent-Runner-Token`). It is embedded in the pages the server renders, which
//! another site cannot read (the Host check and the browser's same-origin rule keep
//! them apart), so a request that carries it comes from one of our pages or from a
//! program that read one. 256 random bits from the kernel, compared in constant time.

use std::io::Read;

/// The header that carries the token.
pub(crate) const HEADER: &str = "x-agent-runner-token";

/// A random token, fixed for the life of the server process.
#[derive(Clone)]
pub(crate) struct Token(String);

impl Token {
    /// A fresh token from `/dev/urandom`.
    pub(crate) fn generate() -> std::io::Result<Token> {
        let mut bytes = [0u8; 32];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
        Ok(Token(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    /// The token as embedded in pages.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `given` is the token. Takes the same time for every `given` of the
    /// token's length, whichever byte differs.
    pub(crate) fn matches(&self, given: &str) -> bool {
        let (ours, theirs) = (self.0.as_bytes(), given.as_bytes());
        if ours.len() != theirs.len() {
            return false;
        }
        let diff = ours
            .iter()
            .zip(theirs)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        std::hint::black_box(diff) == 0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(***)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_match_only_themselves() {
        let a = Token::generate().unwrap();
        let b = Token::generate().unwrap();
        assert_eq!(a.as_str().len(), 64);
        assert_ne!(a.as_str(), b.as_str());
        assert!(a.matches(a.as_str()));
        assert!(!a.matches(b.as_str()));
        assert!(!a.matches(""));
        assert!(!a.matches(&a.as_str()[..63]));
        let mut last_differs = a.as_str().to_string();
        last_differs.pop();
        last_differs.push(if a.as_str().ends_with('0') { '1' } else { '0' });
        assert!(!a.matches(&last_differs));
        assert_eq!(format!("{a:?}"), "Token(***)");
    }
}
