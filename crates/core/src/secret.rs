//! Secrets: values that must never be shown. `Secret` hides a value from `Debug`;
//! `Redactor` replaces known secret values by `***` in any text we write (Task Note,
//! logs, worker logs, result JSON, error messages).
//!
//! Text is masked where it enters (worker output as it streams, Meta replies, API
//! error bodies, the PRD) and again as a whole where it leaves, and always *before*
//! it is cut, so no prefix of a secret survives a cut (SPEC §10). A multi-line
//! secret (a PEM key) is also masked line by line: YAML block scalars indent every
//! line, and other tools re-wrap, so the value rarely appears whole.
//!
//! Each value is masked in the spellings tools print it in too (`spellings`: base64
//! at any alignment, hex, percent-encoding). Most text holds no secret at all, so
//! one pass over it first looks for where any of them could start (a table of their
//! first four bytes); only text where one does is searched secret by secret.
//!
//! `in_url` finds the credentials a URL carries (to mask them); `credential_in`
//! recognises one in a command-line argument by its form (`task::argv` refuses it
//! there, where every local user can read it).

use std::fmt;
use std::sync::Arc;

mod spellings;

/// Replacement text for a secret value.
pub const MASK: &str = "***";

/// Values shorter than this are not masked in free text: masking every "1" or "yes"
/// would garble notes and logs, and such values cannot be secrets worth the name.
pub(crate) const MIN_MASKED_LEN: usize = 4;

/// A secret value; `Debug` and `Display` print `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: String) -> Self {
        Secret(value)
    }

    /// The real value, for the few places that must hand it on (an HTTP header,
    /// a child's environment).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(MASK)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(MASK)
    }
}

/// The credentials a URL carries: its userinfo (`user:password@`, and the password
/// alone) and the query values that look like keys (`?api-key=...`, as some gateways
/// take one): of a parameter named like a credential, or long enough to be one.
pub fn in_url(url: &str) -> Vec<Secret> {
    const CREDENTIAL_NAMES: &[&str] = &["key", "token", "secret", "sig", "auth", "pass", "code"];
    let mut out = Vec::new();
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let (before_query, query) = rest.split_once('?').unwrap_or((rest, ""));
    let authority = before_query.split(['/', '#']).next().unwrap_or("");
    if let Some((userinfo, _)) = authority.rsplit_once('@') {
        out.push(Secret::new(userinfo.to_string()));
        if let Some((_, password)) = userinfo.split_once(':') {
            out.push(Secret::new(password.to_string()));
        }
    }
    let query = query.split('#').next().unwrap_or("");
    for (name, value) in query.split('&').filter_map(|pair| pair.split_once('=')) {
        let name = name.to_ascii_lowercase();
        if CREDENTIAL_NAMES.iter().any(|c| name.contains(c)) || value.len() >= 12 {
            out.push(Secret::new(value.to_string()));
        }
    }
    out
}

/// Words that make a name a credential's, as a part of it (`api-key`, `auth_token`,
/// `X-Amz-Signature`, `apiKey`).
const CREDENTIAL_WORDS: &[&str] = &[
    "key",
    "apikey",
    "token",
    "secret",
    "password",
    "passwd",
    "pwd",
    "pass",
    "sig",
    "signature",
    "credential",
    "credentials",
    "auth",
    "authorization",
    "bearer",
];

/// Whether `name` names a credential: its last part (split at `-`, `_`, `.`,
/// spaces and quotes, and where camel case starts a word) is a credential word
/// (`api-key`, `auth_token`, `X-Amz-Signature`, `apiKey`; not `apiKeyHelper`).
/// Names with an `env` part (codex's `env_key`) name a variable that holds one.
fn names_credential(name: &str) -> bool {
    let mut parts: Vec<String> = Vec::new();
    let mut part = String::new();
    let mut lower_before = false;
    for c in name.chars() {
        let camel = c.is_ascii_uppercase() && lower_before;
        lower_before = c.is_ascii_lowercase();
        if !c.is_ascii_alphanumeric() || camel {
            if !part.is_empty() {
                parts.push(std::mem::take(&mut part));
            }
            if !c.is_ascii_alphanumeric() {
                continue;
            }
        }
        part.push(c.to_ascii_lowercase());
    }
    parts.push(part);
    let last = parts.last().map_or("", String::as_str);
    !parts.iter().any(|p| p == "env")
        && (CREDENTIAL_WORDS.contains(&last) || CREDENTIAL_WORDS.contains(&parts.concat().as_str()))
}

/// Whether `value` could be a secret rather than a setting: long enough, not a
/// number, not a reference to a variable (`$KEY`, `${KEY}`).
fn could_be_secret(value: &str) -> bool {
    value.len() >= 8 && !value.starts_with('$') && !value.bytes().all(|b| b.is_ascii_digit())
}

/// What shows a credential in `text` (a command-line argument), said without its
/// value: a password or a token in a URL, a query parameter named like a key, a
/// value given to a name like a key (`api_key=…`, `"token": "…"`), a bearer token.
/// None when nothing does. (Known secret values are the caller's to look for.)
pub fn credential_in(text: &str) -> Option<String> {
    // URLs: the user part, and the query.
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let after = &rest[at + 3..];
        let end = after
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '<' | '>'))
            .unwrap_or(after.len());
        let url = &after[..end];
        let authority = url.split(['/', '?', '#']).next().unwrap_or("");
        if let Some((userinfo, _)) = authority.rsplit_once('@') {
            match userinfo.split_once(':') {
                Some((_, password)) if !password.is_empty() => {
                    return Some("a password in a URL".into());
                }
                None if userinfo.len() >= 16 => {
                    return Some("a token in a URL's user part".into());
                }
                _ => {}
            }
        }
        if let Some((_, query)) = url.split_once('?') {
            let query = query.split('#').next().unwrap_or("");
            for (name, value) in query.split('&').filter_map(|p| p.split_once('=')) {
                if names_credential(name) && !value.is_empty() && !value.starts_with('$') {
                    return Some(format!("the query parameter `{name}` of a URL"));
                }
            }
        }
        rest = &after[end..];
    }
    // `Bearer <token>`, `Basic <user:password>`, as in a header given on the
    // command line.
    for (at, scheme) in text
        .match_indices("Bearer ")
        .chain(text.match_indices("Basic "))
    {
        let token: String = text[at + scheme.len()..]
            .chars()
            .take_while(|c| !c.is_whitespace() && !matches!(c, '"' | '\''))
            .collect();
        if could_be_secret(&token) {
            return Some(format!("a {}token", scheme.to_lowercase()));
        }
    }
    // `name=value`, `name = "value"`, `"name": "value"`: a value given to a name
    // like a key's.
    for (at, sign) in text.match_indices(['=', ':']) {
        let before = text[..at].trim_end().trim_end_matches(['"', '\'']);
        let name_start = before
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            .last()
            .map_or(before.len(), |(i, _)| i);
        let name = &before[name_start..];
        let after = text[at + sign.len()..].trim_start();
        let value = match after.strip_prefix(['"', '\'']) {
            Some(quoted) => quoted.split(['"', '\'']).next().unwrap_or(""),
            None => after
                .split(|c: char| c.is_whitespace() || matches!(c, ',' | '}' | ']' | ';'))
                .next()
                .unwrap_or(""),
        };
        if sign == ":" && value.starts_with("//") {
            continue;
        }
        if names_credential(name) && could_be_secret(value) {
            return Some(format!("a value given to `{name}`"));
        }
    }
    None
}

/// Masks a fixed set of secret values in text.
#[derive(Clone, Default)]
pub struct Redactor {
    /// Longest first, so a secret that contains another is masked whole.
    patterns: Vec<String>,
    /// A bit per hash of the first four bytes of each pattern.
    starts: Arc<[u64]>,
    /// The first four bytes of each pattern and its index, sorted.
    firsts: Arc<[(u32, usize)]>,
}

/// Bits in `Redactor::starts` (8 KiB: it stays in the CPU's first cache).
const START_BITS: usize = 1 << 16;

// `start_hash` reads the first four bytes of every pattern.
const _: () = assert!(MIN_MASKED_LEN >= 4);

fn first_four(pattern: &[u8]) -> u32 {
    let mut four = [0u8; 4];
    four.copy_from_slice(&pattern[..4]);
    u32::from_le_bytes(four)
}

fn start_hash(word: u32) -> usize {
    (word.wrapping_mul(0x9E37_79B1) >> 16) as usize
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Redactor({} patterns)", self.patterns.len())
    }
}

impl Redactor {
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a Secret>) -> Self {
        let mut patterns: Vec<String> = Vec::new();
        let mut add = |value: &str| {
            if value.len() < MIN_MASKED_LEN {
                return;
            }
            patterns.push(value.to_string());
            // The worker's JSONL carries text JSON-escaped; mask that spelling too.
            let escaped = serde_json::to_string(value).unwrap_or_default();
            let escaped = escaped.trim_matches('"');
            if escaped != value {
                patterns.push(escaped.to_string());
            }
        };
        for secret in secrets {
            let value = secret.expose();
            add(value);
            for spelling in spellings::of(value) {
                add(&spelling);
            }
            if value.contains(['\n', '\r']) {
                for line in value.lines() {
                    add(line.trim());
                }
            }
        }
        patterns.sort_by_key(|p| std::cmp::Reverse(p.len()));
        patterns.dedup();
        let mut starts = vec![0u64; START_BITS / 64];
        let mut firsts = Vec::with_capacity(patterns.len());
        for (n, pattern) in patterns.iter().enumerate() {
            let word = first_four(pattern.as_bytes());
            let h = start_hash(word);
            starts[h / 64] |= 1 << (h % 64);
            firsts.push((word, n));
        }
        firsts.sort_unstable();
        Redactor {
            patterns,
            starts: starts.into(),
            firsts: firsts.into(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// Whether a secret occurs in `bytes`: one pass over its 4-byte windows, each
    /// looked up in `starts`; a window found there is checked against the patterns
    /// that start with it (`firsts`, sorted).
    fn occurs(&self, bytes: &[u8]) -> bool {
        if self.patterns.is_empty() || bytes.len() < MIN_MASKED_LEN {
            return false;
        }
        let starts = &self.starts[..START_BITS / 64];
        // The window ending at each byte, rolled in a byte at a time.
        let mut word = first_four(bytes) << 8;
        for (n, &byte) in bytes[3..].iter().enumerate() {
            word = (word >> 8) | (u32::from(byte) << 24);
            let h = start_hash(word);
            if starts[h / 64] & (1 << (h % 64)) != 0 && self.starts_at(bytes, n, word) {
                return true;
            }
        }
        false
    }

    /// Whether a pattern that starts with `word` starts at `at` in `bytes`.
    #[cold]
    fn starts_at(&self, bytes: &[u8], at: usize, word: u32) -> bool {
        let first = self.firsts.partition_point(|(w, _)| *w < word);
        self.firsts[first..]
            .iter()
            .take_while(|(w, _)| *w == word)
            .any(|(_, n)| bytes[at..].starts_with(self.patterns[*n].as_bytes()))
    }

    /// Length of the longest end of `bytes` that is the start (not the whole) of a
    /// secret: what a streaming masker must hold back.
    fn partial_suffix(&self, bytes: &[u8]) -> usize {
        self.patterns
            .iter()
            .filter_map(|p| {
                let p = p.as_bytes();
                (1..p.len().min(bytes.len() + 1))
                    .rev()
                    .find(|&k| bytes.ends_with(&p[..k]))
            })
            .max()
            .unwrap_or(0)
    }

    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        if !self.occurs(text.as_bytes()) {
            return out;
        }
        for pattern in &self.patterns {
            if out.contains(pattern.as_str()) {
                out = out.replace(pattern.as_str(), MASK);
            }
        }
        out
    }

    /// Masks secrets in raw bytes (worker output need not be UTF-8).
    pub(crate) fn redact_bytes(&self, bytes: &[u8]) -> Vec<u8> {
        let mut out = bytes.to_vec();
        if !self.occurs(bytes) {
            return out;
        }
        for pattern in &self.patterns {
            if memchr::memmem::find(&out, pattern.as_bytes()).is_some() {
                out = replace_bytes(&out, pattern.as_bytes(), MASK.as_bytes());
            }
        }
        out
    }
}

fn replace_bytes(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return haystack.to_vec();
    }
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    while let Some(offset) = haystack[i..].iter().position(|&b| b == needle[0]) {
        let at = i + offset;
        out.extend_from_slice(&haystack[i..at]);
        if haystack[at..].starts_with(needle) {
            out.extend_from_slice(with);
            i = at + needle.len();
        } else {
            out.push(haystack[at]);
            i = at + 1;
        }
    }
    out.extend_from_slice(&haystack[i..]);
    out
}

/// Masks secrets in a byte stream that arrives in chunks: a secret split across two
/// chunks is still masked, because a chunk's end that could be the start of a secret
/// is held back until the next chunk (or `finish`). Everything else passes at once,
/// so a log written through it keeps up with the output.
#[derive(Debug)]
pub(crate) struct StreamRedactor {
    redactor: Redactor,
    pending: Vec<u8>,
}

impl StreamRedactor {
    pub(crate) fn new(redactor: Redactor) -> Self {
        StreamRedactor {
            redactor,
            pending: Vec::new(),
        }
    }

    /// Feeds a chunk; returns the bytes that are safe to write now.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        if self.redactor.is_empty() {
            return chunk.to_vec();
        }
        self.pending.extend_from_slice(chunk);
        let masked = self.redactor.redact_bytes(&self.pending);
        let cut = masked.len() - self.redactor.partial_suffix(&masked);
        self.pending = masked[cut..].to_vec();
        masked[..cut].to_vec()
    }

    /// The held-back tail, masked.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        let rest = std::mem::take(&mut self.pending);
        self.redactor.redact_bytes(&rest)
    }
}

#[cfg(test)]
mod microbench;

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::quickcheck;

    fn redactor(values: &[&str]) -> Redactor {
        let secrets: Vec<Secret> = values.iter().map(|v| Secret::new(v.to_string())).collect();
        Redactor::new(&secrets)
    }

    #[test]
    fn masks_every_occurrence_and_the_json_spelling() {
        let r = redactor(&["s3cr\"et-value"]);
        assert_eq!(r.redact("a s3cr\"et-value b s3cr\"et-value"), "a *** b ***");
        assert_eq!(r.redact(r#"{"x":"s3cr\"et-value"}"#), r#"{"x":"***"}"#);
    }

    /// Issue 41 (attack round 5, finding 6): a setup secret's base64 reached
    /// setup.log and the note, since only the exact value was masked.
    #[test]
    fn a_secrets_base64_hex_and_url_spellings_are_masked_anywhere() {
        let token = "setup-only-token-0123456789";
        let r = redactor(&[token]);
        let b64 = |bytes: &[u8]| {
            let mut child = std::process::Command::new("base64")
                .arg("-w0")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            use std::io::Write;
            child.stdin.take().unwrap().write_all(bytes).unwrap();
            String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap()
        };
        // Alone, and inside longer texts at each alignment, as `base64` prints them.
        for before in ["", "x", "TOKEN=", "export TOKEN="] {
            let plain = format!("{before}{token}\n");
            let encoded = b64(plain.as_bytes());
            for text in [encoded.clone(), encoded.replace('+', "-").replace('/', "_")] {
                let masked = r.redact(&text);
                let (head, tail) = masked
                    .split_once(MASK)
                    .unwrap_or_else(|| panic!("{masked}"));
                assert!(text.starts_with(head) && text.ends_with(tail), "{masked}");
                // At most a character (6 bits) of the secret is left at each edge.
                let removed = text.len() - head.len() - tail.len();
                assert!(removed >= token.len() * 4 / 3 - 2, "{text} -> {masked}");
            }
        }
        let hex: String = token.bytes().map(|b| format!("{b:02x}")).collect();
        assert_eq!(r.redact(&format!("<{hex}>")), "<***>");
        assert_eq!(r.redact(&format!("<{}>", hex.to_uppercase())), "<***>");
        let spaced = redactor(&["p@ss word/with+signs"]);
        assert_eq!(
            spaced.redact("https://h/?t=p%40ss%20word%2Fwith%2Bsigns&x=1"),
            "https://h/?t=***&x=1"
        );
        // A short value is masked as itself only.
        assert_eq!(redactor(&["abcd"]).redact("YWJjZA== abcd"), "YWJjZA== ***");
    }

    #[test]
    fn multi_line_secrets_are_masked_line_by_line() {
        let pem = "-----BEGIN KEY-----\nMIIEvAIBADANBgkqhkiG9w0\nAQEFAASCBKYwggSiAgEA\n-----END KEY-----\n";
        let r = redactor(&[pem]);
        let yaml = format!("key: |\n  {}\n", pem.trim_end().replace('\n', "\n  "));
        let masked = r.redact(&yaml);
        assert!(
            !masked.contains("MIIEvAIBAD") && !masked.contains("AQEFAASC"),
            "{masked}"
        );
        assert_eq!(masked, "key: |\n  ***\n  ***\n  ***\n  ***\n");
        assert_eq!(r.redact(pem), "***");
    }

    #[test]
    fn credentials_in_urls_are_secrets() {
        let found: Vec<String> = in_url(
            "https://user:hunter2secret@gw.example/v1?api-key=qs1&format=json&x=0123456789abc#f",
        )
        .iter()
        .map(|s| s.expose().to_string())
        .collect();
        assert_eq!(
            found,
            [
                "user:hunter2secret",
                "hunter2secret",
                "qs1",
                "0123456789abc"
            ]
        );
        assert!(in_url("https://api.openai.com/v1").is_empty());
    }

    #[test]
    fn credentials_in_arguments_are_found_and_settings_are_not() {
        for (arg, found) in [
            ("http://user:PW-123@h:1/v1", "a password in a URL"),
            (
                "-c base_url=\"https://u:p@gw.example\"",
                "a password in a URL",
            ),
            (
                "https://ghp_0123456789abcdef0123@github.com/x.git",
                "a token in a URL's user part",
            ),
            (
                "http://gw/v1?api-key=K1",
                "the query parameter `api-key` of a URL",
            ),
            (
                "http://gw/v1?format=json&X-Amz-Signature=abc",
                "the query parameter `X-Amz-Signature` of a URL",
            ),
            (
                "http://gw/v1?apiKey=abc",
                "the query parameter `apiKey` of a URL",
            ),
            ("Authorization: Bearer sk-0123456789", "a bearer token"),
            ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "a basic token"),
            ("-c", ""),
            (
                "model_providers.x.experimental_bearer_token=\"sk-live-0123\"",
                "a value given to `model_providers.x.experimental_bearer_token`",
            ),
            (
                "model_providers.x={name=\"x\", api_key = \"sk-0123456789\"}",
                "a value given to `api_key`",
            ),
            (
                "{\"env\": {\"ANTHROPIC_API_KEY\": \"sk-ant-0123456789\"}}",
                "a value given to `ANTHROPIC_API_KEY`",
            ),
            ("--api-key=sk-0123456789", "a value given to `--api-key`"),
            ("--password=hunter2hunter2", "a value given to `--password`"),
        ] {
            let got = credential_in(arg);
            if found.is_empty() {
                assert_eq!(got, None, "{arg}");
            } else {
                assert_eq!(got.as_deref(), Some(found), "{arg}");
            }
        }
        for arg in [
            "model_providers.fake={name=\"fake\",base_url=\"http://127.0.0.1:9/v1\",env_key=\"FAKE_OPENAI_KEY\",wire_api=\"responses\"}",
            "analytics.enabled=false",
            "ssh://git@github.com/x.git",
            "http://gw.example:8080/v1?api-version=2024-05-01-preview",
            "max_output_tokens=100000000",
            "model_reasoning_effort=high",
            "api_key=$OPENAI_API_KEY",
            "token=${TOKEN}",
            "Authorization: Bearer $TOKEN",
            "--disable",
            "plugins",
            "https://api.openai.com/v1",
            "key=short",
            "--settings",
            "{\"apiKeyHelper\": \"/usr/local/bin/get-key\"}",
        ] {
            assert_eq!(credential_in(arg), None, "{arg}");
        }
    }

    quickcheck! {
        fn arbitrary_arguments_never_panic(text: String) -> bool {
            let _ = credential_in(&text);
            true
        }
    }

    #[test]
    fn short_values_are_left_alone() {
        let r = redactor(&["1", "abc"]);
        assert!(r.is_empty());
        assert_eq!(r.redact("123 abc"), "123 abc");
    }

    #[test]
    fn debug_never_shows_the_value() {
        let s = Secret::new("sk-live-123456".into());
        assert_eq!(format!("{s:?} {s}"), "*** ***");
    }

    #[test]
    fn stream_holds_back_only_what_could_start_a_secret() {
        let mut stream = StreamRedactor::new(redactor(&["TOPSECRET"]));
        assert_eq!(stream.push(b"line one\n"), b"line one\n");
        assert_eq!(stream.push(b"ends with TOP"), b"ends with ");
        assert_eq!(stream.push(b"PING\n"), b"TOPPING\n");
    }

    #[test]
    fn stream_masks_secrets_split_across_chunks() {
        let mut stream = StreamRedactor::new(redactor(&["TOPSECRET"]));
        let mut out = stream.push(b"aaaTOP");
        out.extend(stream.push(b"SEC"));
        out.extend(stream.push(b"RETbbb"));
        out.extend(stream.finish());
        assert_eq!(out, b"aaa***bbb");
    }

    quickcheck! {
        fn stream_equals_whole_text_with_spellings(chunks: Vec<(Vec<u8>, u8)>) -> bool {
            let token = "setup-only-token-0123456789";
            let r = redactor(&[token]);
            let spellings = spellings::of(token);
            let mut stream = StreamRedactor::new(r.clone());
            let (mut out, mut whole) = (Vec::new(), Vec::new());
            for (chunk, pick) in &chunks {
                // Arbitrary bytes with a spelling of the secret among them.
                let mut chunk = chunk.clone();
                let spelling = &spellings[usize::from(*pick) % spellings.len()];
                chunk.extend_from_slice(spelling.as_bytes());
                whole.extend_from_slice(&chunk);
                out.extend(stream.push(&chunk));
            }
            out.extend(stream.finish());
            out == r.redact_bytes(&whole) && !chunks.iter().any(|_| {
                memchr::memmem::find(&out, token.as_bytes()).is_some()
            })
        }
    }

    quickcheck! {
        fn stream_equals_whole_text(chunks: Vec<Vec<u8>>) -> bool {
            let r = redactor(&["abab", "SECRET"]);
            let mut stream = StreamRedactor::new(r.clone());
            let mut out = Vec::new();
            let mut whole = Vec::new();
            for chunk in &chunks {
                whole.extend_from_slice(chunk);
                out.extend(stream.push(chunk));
            }
            out.extend(stream.finish());
            out == r.redact_bytes(&whole)
        }
    }
}
