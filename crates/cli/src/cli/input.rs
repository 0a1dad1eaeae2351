//! Reading the Task YAML (or `plan -`'s message) from stdin: bounded, UTF-8
//! checked, and given up at once when a signal arrives (a supervisor's SIGTERM must
//! not wait for an EOF that may never come).

use std::io::{IsTerminal, Read};
use std::sync::mpsc;
use std::time::Duration;

use crate::error::Error;
use agent_runner_core::interrupt::Interrupt;

/// Largest Task YAML read from stdin.
pub(crate) const MAX_STDIN_BYTES: u64 = 16 << 20;

/// The whole of stdin as text; `Error::Interrupted` if a stop is asked for first.
pub(crate) fn read_stdin(interrupt: Interrupt) -> Result<String, Error> {
    read_text(
        "the Task YAML",
        "`agent-runner validate < task.yaml`",
        interrupt,
    )
}

/// The whole of stdin as text, `what` (`example` shows how it is given).
pub(crate) fn read_text(what: &str, example: &str, interrupt: Interrupt) -> Result<String, Error> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return Err(Error::Stdin(format!(
            "expected {what} on stdin, e.g. {example}"
        )));
    }
    let (sender, receiver) = mpsc::channel();
    // The reader thread may stay blocked in read(2) after an interrupt; the process
    // exits without waiting for it.
    std::thread::Builder::new()
        .name("stdin".into())
        .spawn(move || {
            let mut bytes = Vec::new();
            let result = std::io::stdin()
                .lock()
                .take(MAX_STDIN_BYTES + 1)
                .read_to_end(&mut bytes)
                .map(|_| bytes);
            let _ = sender.send(result);
        })
        .map_err(|e| Error::Stdin(format!("cannot start a reader: {e}")))?;
    let bytes = loop {
        if interrupt.is_set() {
            return Err(Error::Interrupted);
        }
        match receiver.recv_timeout(Duration::from_millis(20)) {
            Ok(result) => break result.map_err(|e| Error::Stdin(format!("cannot read: {e}")))?,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(Error::Stdin("the reader stopped".into()));
            }
        }
    };
    if bytes.len() as u64 > MAX_STDIN_BYTES {
        return Err(Error::Stdin(format!(
            "{what} is larger than {MAX_STDIN_BYTES} bytes"
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = valid.iter().filter(|&&b| b == b'\n').count() + 1;
        let column = valid.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
        Error::Stdin(format!(
            "not valid UTF-8 (invalid byte at line {line}, column {column})"
        ))
    })
}
