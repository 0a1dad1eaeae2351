//! A command another process started for us (the sandbox's main process,
//! `agent-runner-sandbox`'s `main_exec`), waited for as `run` waits for a child
//! of ours: its stdio are our pipes, its end and our signals go through its
//! starter.

use std::fs::File;
use std::io::Write;
use std::process::ExitStatus;
use std::sync::mpsc::sync_channel;
use std::time::{Duration, Instant};

use super::{
    Awaited, CHANNEL_CHUNKS, Capture, Finished, Limits, Stop, Stream, Waiter, spawn_reader,
};
use crate::sys::Signal;

/// A command another process started for us, with our ends of its stdio.
pub struct Attached<'r> {
    pub remote: &'r mut dyn Remote,
    pub stdin: File,
    pub stdout: File,
    pub stderr: File,
}

/// `run` for a command another process started (`Attached`): its stdin gets
/// `stdin`, then `stdin_file` from where it stands; its output goes into
/// `capture`, under `limits`; a limit reached runs `stop`, then SIGKILL through
/// its starter.
pub fn run_attached(
    attached: Attached,
    stdin: Vec<u8>,
    stdin_file: Option<std::sync::Arc<File>>,
    limits: &Limits,
    capture: &mut Capture,
    stop: Stop,
) -> Finished {
    let started = Instant::now();
    let Attached {
        remote,
        stdin: mut input,
        stdout,
        stderr,
    } = attached;
    std::thread::spawn(move || {
        if input.write_all(&stdin).is_ok()
            && let Some(file) = stdin_file
        {
            let _ = std::io::copy(&mut &*file, &mut input);
        }
    });
    let (sender, receiver) = sync_channel(CHANNEL_CHUNKS);
    spawn_reader(stdout, Stream::Stdout, sender.clone());
    spawn_reader(stderr, Stream::Stderr, sender);
    let mut remote = remote;
    let waiter = Waiter {
        child: &mut remote,
        receiver,
        open: 2,
        capture,
        started,
        last_output: started,
        exited_at: None,
    };
    waiter.finish(limits, stop)
}

/// A command another process started for us (the sandbox's main process:
/// `run_attached`), which reports its end and passes on our signals.
pub trait Remote: Send {
    /// Its wait status once it has ended (waiting up to `timeout`); an error when
    /// it can no longer say (its starter is gone).
    fn wait_timeout(&mut self, timeout: Duration) -> std::io::Result<Option<ExitStatus>>;
    /// To its process group.
    fn signal(&mut self, signal: Signal);
}

impl Awaited for &mut dyn Remote {
    fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        (**self).wait_timeout(Duration::ZERO)
    }

    fn wait_timeout(&mut self, timeout: Duration) -> std::io::Result<Option<ExitStatus>> {
        (**self).wait_timeout(timeout)
    }

    fn signal(&mut self, signal: Signal) {
        (**self).signal(signal)
    }
}
