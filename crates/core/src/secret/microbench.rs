//! The masking's throughput alone, by hand (figures, not checks):
//!
//!   cargo test --release -p agent-runner-core --lib microbench -- --ignored --nocapture --test-threads 1
//!
//! Worker output streams through `StreamRedactor` (each run's log, in chunks) and
//! whole texts through `Redactor::redact` (tails, the note). The text is log-like
//! lines without any secret (the common case) and with a few of them.

use std::time::Instant;

use super::{Redactor, Secret, StreamRedactor};

const TEXT_BYTES: usize = 16 << 20;
const CHUNK: usize = 8 << 10;

fn secrets() -> Vec<Secret> {
    [
        "sk-live-0123456789abcdefghijklmnopqrstuv",
        "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef0123",
        "hunter2-the-setup-token",
    ]
    .iter()
    .map(|s| Secret::new(s.to_string()))
    .collect()
}

fn text(with_secrets: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(TEXT_BYTES + 200);
    let mut n = 0u64;
    while out.len() < TEXT_BYTES {
        n += 1;
        let line = if with_secrets && n.is_multiple_of(1000) {
            format!("{n:>8} token=sk-live-0123456789abcdefghijklmnopqrstuv done\n")
        } else {
            format!(
                "{n:>8} Compiling crate-{} v0.{}.{} (/project/crates/x) in {} ms; warnings: none\n",
                n % 97,
                n % 13,
                n % 7,
                n * 7 % 1000
            )
        };
        out.extend_from_slice(line.as_bytes());
    }
    out
}

fn mib_per_s(bytes: usize, seconds: f64) -> f64 {
    bytes as f64 / (1 << 20) as f64 / seconds
}

/// Runs `f` `ROUNDS` times; the best time, in seconds (the machine is shared:
/// the best round is the one least disturbed).
fn best(mut f: impl FnMut() -> usize) -> (f64, usize) {
    let mut best = f64::MAX;
    let mut out = 0;
    for _ in 0..ROUNDS {
        let started = Instant::now();
        out = f();
        best = best.min(started.elapsed().as_secs_f64());
    }
    (best, out)
}

const ROUNDS: usize = 7;

fn measure(with_secrets: bool) {
    let redactor = Redactor::new(&secrets());
    let text = text(with_secrets);
    let what = if with_secrets { "some" } else { "no" };
    let (streamed, written) = best(|| {
        let mut stream = StreamRedactor::new(redactor.clone());
        let mut written = 0;
        for chunk in text.chunks(CHUNK) {
            written += stream.push(chunk).len();
        }
        written + stream.finish().len()
    });
    let whole = String::from_utf8_lossy(&text).into_owned();
    let (redacted, masked) = best(|| redactor.redact(&whole).len());
    eprintln!(
        "masking, {what} secrets in {} MiB (best of {ROUNDS}): stream {:.0} MiB/s ({} KiB chunks), whole text {:.0} MiB/s ({written} / {masked} bytes out)",
        TEXT_BYTES >> 20,
        mib_per_s(text.len(), streamed),
        CHUNK >> 10,
        mib_per_s(text.len(), redacted),
    );
}

#[test]
#[ignore = "a micro-benchmark, by hand"]
fn microbench_masking() {
    measure(false);
    measure(true);
}
