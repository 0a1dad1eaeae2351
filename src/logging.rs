//! The progress log on stderr: one readable line per event, secrets masked.
//! `RUST_LOG` filters it (default `info`).

use std::io::Write;

use crate::secret;
use crate::timestamp::Timestamp;

/// Installs the stderr logger. Safe to call more than once (later calls do nothing).
pub fn init() {
    let env = env_logger::Env::default().default_filter_or("info");
    let _ = env_logger::Builder::from_env(env)
        .format(|buf, record| {
            let message = secret::redact_global(&record.args().to_string());
            let clock = Timestamp::now().clock();
            match record.level() {
                log::Level::Info => writeln!(buf, "{clock} {message}"),
                level => writeln!(buf, "{clock} {level} {message}"),
            }
        })
        .try_init();
}
