//! The progress log on stderr: one readable line per event, from agent-runner's own
//! code only (other crates' records, e.g. ureq's header dumps at `trace`, could carry
//! a key), secrets masked, control characters shown escaped. `RUST_LOG` filters it
//! (default `info`).
//!
//! The logger is process-wide by nature (the `log` facade), so the secrets it masks
//! are set here once they are known, through `mask`.

use std::io::Write;
use std::sync::RwLock;

use crate::secret::Redactor;
use crate::text::escape_controls;
use crate::timestamp::Timestamp;

static MASK: RwLock<Option<Redactor>> = RwLock::new(None);

/// Installs the stderr logger. Safe to call more than once (later calls do nothing).
pub fn init() {
    let env = env_logger::Env::default().default_filter_or("info");
    let _ = env_logger::Builder::from_env(env)
        .format(|buf, record| {
            if !is_ours(record.target()) {
                return Ok(());
            }
            let message = record.args().to_string();
            let message = match MASK.read() {
                Ok(mask) => mask
                    .as_ref()
                    .map_or(message.clone(), |m| m.redact(&message)),
                Err(_) => message,
            };
            let message = escape_controls(&message);
            let clock = Timestamp::now().clock();
            match record.level() {
                log::Level::Info => writeln!(buf, "{clock} {message}"),
                level => writeln!(buf, "{clock} {level} {message}"),
            }
        })
        .try_init();
}

/// Masks `redactor`'s secrets in every later log line.
pub fn mask(redactor: &Redactor) {
    if let Ok(mut mask) = MASK.write() {
        *mask = Some(redactor.clone());
    }
}

/// Our crates' targets: `agent_runner` (the binary) and `agent_runner_<crate>`.
fn is_ours(target: &str) -> bool {
    let root = target.split("::").next().unwrap_or(target);
    root == "agent_runner" || root.starts_with("agent_runner_")
}
