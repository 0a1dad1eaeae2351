//! The copy transport's carrier: a container created (never started) from the
//! empty image with a volume mounted, the other end of `docker cp` for the copy
//! and for the session volume.

use super::daemon;
use std::fs::File;
use std::io::{BufWriter, PipeWriter};
use std::os::fd::OwnedFd;
use std::time::Duration;

use super::BackendError;
use super::bundle_out;
use super::daemon::call;
use super::docker_cli::{self, last_lines};
use super::pulled::{Forward, StreamReader};
use super::tar::TarWriter;
use super::tools::{CARRIER_IMAGE, carrier_image};
use super::tree_back::TreeBackError;
use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::Ending;
use agent_runner_core::timestamp::human;

/// Short docker calls.
pub(super) const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// A copy in or out, and the bundler's run.
pub(super) const COPY_TIMEOUT: Duration = Duration::from_secs(600);

pub(super) fn failed(command: &str, stderr: &str) -> BackendError {
    BackendError::Failed {
        command: command.into(),
        detail: last_lines(stderr, 3),
    }
}

/// Why `Carrier::stream_out` gave nothing: docker's failure first, else the
/// reader's.
#[derive(Debug, thiserror::Error)]
pub(super) enum StreamOutError {
    #[error(transparent)]
    Call(#[from] BackendError),
    /// `docker cp` failed, with its stderr's last lines.
    #[error("docker cp {from} -: {stderr}")]
    Failed { from: String, stderr: String },
    #[error("the reader of the work's tree failed")]
    ReaderPanicked,
    #[error(transparent)]
    Read(#[from] TreeBackError),
}

/// A container created (never started) from the empty image with a volume at
/// `target`, for `docker cp`; removed when dropped.
pub(super) struct Carrier {
    pub(super) name: String,
    interrupt: Interrupt,
}

impl Carrier {
    pub(super) fn create(
        volume: &str,
        target: &str,
        labels: &[String],
        interrupt: Interrupt,
    ) -> Result<Carrier, BackendError> {
        let name = format!(
            "agent-runner-copy-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        );
        let mount = format!("type=volume,source={volume},target={target}");
        let mut args = vec![
            "create",
            "--pull",
            "never",
            "--name",
            &name,
            "--network",
            "none",
        ];
        for label in labels {
            args.extend(["--label", label.as_str()]);
        }
        args.extend(["--mount", &mount, CARRIER_IMAGE, "/none"]);
        let mut out = call(&args, CALL_TIMEOUT, interrupt)?;
        // The empty image is made on a host's first copy: looked for only when the
        // create failed, which saves a round trip on every other.
        if !out.ok {
            carrier_image(interrupt)?;
            out = call(&args, CALL_TIMEOUT, interrupt)?;
        }
        if !out.ok {
            return Err(failed("docker create", &out.stderr));
        }
        Ok(Carrier { name, interrupt })
    }

    /// Removed on a thread of its own (the sandbox may start meanwhile: the volume
    /// is shared); joined by `Copy::clean_up`.
    pub(super) fn remove_aside(self) -> std::thread::JoinHandle<()> {
        std::thread::spawn(move || drop(self))
    }

    /// One `docker cp -a - <container>:<dir>`, its stdin the tar stream `write`
    /// writes (`tar.rs`), streamed as it is written: owners kept, so the worker
    /// (this machine's user) owns its files there as here. What the stream left out.
    pub(super) fn copy_in(
        &self,
        dir: &str,
        write: impl FnOnce(&mut TarWriter<BufWriter<PipeWriter>>) -> std::io::Result<()> + Send,
    ) -> Result<Vec<String>, BackendError> {
        let io = |e: std::io::Error| BackendError::Io(format!("the copy transport: {e}"));
        let (reader, writer) = std::io::pipe().map_err(io)?;
        let target = format!("{}:{dir}", self.name);
        let args = ["cp", "-a", "-", target.as_str()];
        let invocation = docker_cli::command()
            .args(args)
            .stdin_file(File::from(OwnedFd::from(reader)));
        let (out, written) = std::thread::scope(|scope| {
            let writing = scope.spawn(move || {
                let mut tar = TarWriter::new(BufWriter::with_capacity(1 << 16, writer));
                write(&mut tar)?;
                let skipped = std::mem::take(&mut tar.skipped);
                tar.finish()?;
                Ok::<_, std::io::Error>(skipped)
            });
            let out = daemon::guarded(&invocation, COPY_TIMEOUT, self.interrupt);
            // The stream's last reader here closed: a writer docker left stops.
            drop(invocation);
            let written = writing
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("the tar writer failed")));
            (out, written)
        });
        let out = out?;
        match (out.ok, written) {
            (true, Ok(skipped)) => Ok(skipped),
            // The writer's own error first: docker then only saw the stream end.
            (_, Err(e)) if out.ok || e.kind() != std::io::ErrorKind::BrokenPipe => Err(io(e)),
            _ => Err(failed(&format!("docker {}", args.join(" ")), &out.stderr)),
        }
    }

    /// `docker cp <container>:<path> -`: the tar stream of `path` handed to
    /// `consume` as it comes (on a thread of its own), never kept here. What
    /// `consume` returned; docker's error first when both failed.
    pub(super) fn stream_out<T: Send>(
        &self,
        path: &str,
        consume: impl FnOnce(StreamReader) -> Result<T, TreeBackError> + Send,
    ) -> Result<T, StreamOutError> {
        let source = format!("{}:{path}", self.name);
        let invocation = docker_cli::command().args(["cp", source.as_str(), "-"]);
        let (mut forward, stream) = Forward::new();
        let (out, consumed) = std::thread::scope(|scope| {
            let consuming = scope.spawn(move || consume(stream));
            let out =
                daemon::guarded_streaming(&invocation, COPY_TIMEOUT, self.interrupt, &mut forward);
            // The end of the stream for the reader, however docker ended.
            drop(forward);
            let consumed = consuming
                .join()
                .map_err(|_| StreamOutError::ReaderPanicked)
                .and_then(|consumed| consumed.map_err(StreamOutError::from));
            (out, consumed)
        });
        match out {
            Err(e) => Err(e.into()),
            Ok(out) if !out.ok => Err(StreamOutError::Failed {
                from: source,
                stderr: last_lines(&out.stderr, 3),
            }),
            Ok(_) => consumed,
        }
    }

    /// The file at `path` in the container into `to`, at most `max` bytes, bounded
    /// while it streams (`bundle_out.rs`); watched like every long call.
    pub(super) fn copy_out(&self, path: &str, to: File, max: u64) -> Result<u64, BackendError> {
        let source = format!("{}:{path}", self.name);
        let invocation = docker_cli::command().args(["cp", source.as_str(), "-"]);
        let mut reader = bundle_out::reader(to, max);
        let out =
            daemon::guarded_streaming(&invocation, COPY_TIMEOUT, self.interrupt, &mut reader)?;
        let command = format!("docker cp {source} -");
        match out.ending {
            Ending::Interrupted => return Err(BackendError::Interrupted),
            Ending::TimedOut | Ending::Stalled => {
                return Err(BackendError::Failed {
                    command,
                    detail: format!("no answer within {}", human(COPY_TIMEOUT)),
                });
            }
            Ending::Exited => {}
        }
        // The stream's own fault first: a bound passed is why, whatever docker said.
        match (bundle_out::result(reader), out.ok) {
            (Err(why), _) => Err(BackendError::Io(format!("{command}: {why}"))),
            (Ok(written), true) => Ok(written),
            (Ok(_), false) => Err(failed(&command, &out.stderr)),
        }
    }
}

impl Drop for Carrier {
    fn drop(&mut self) {
        daemon::remove_container(&self.name, CALL_TIMEOUT);
    }
}
