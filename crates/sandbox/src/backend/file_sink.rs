//! A process's stdout written to a new file as it streams, bounded: what an exec
//! or a docker call gives out in bulk (a bundle, a tree, the tools) lands in a
//! file of ours and never in memory.

use std::io::Write;
use std::path::{Path, PathBuf};

use agent_runner_core::process::StreamFilter;

/// See the module documentation.
pub(crate) struct FileSink {
    file: std::io::BufWriter<std::fs::File>,
    written: u64,
    limit: u64,
    error: Option<SinkError>,
}

/// Why a `FileSink` did not take the whole stream.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SinkError {
    #[error("{}/{name}: {source}", .dir.display())]
    Create {
        dir: PathBuf,
        name: String,
        source: std::io::Error,
    },
    #[error("more than {0} bytes")]
    TooLarge(u64),
    #[error(transparent)]
    Write(#[from] std::io::Error),
}

impl FileSink {
    /// `name`, new in `dir` (opened through `core::fs`), taking at most `limit` bytes.
    pub(crate) fn create(dir: &Path, name: &str, limit: u64) -> Result<FileSink, SinkError> {
        let file = agent_runner_core::fs::Dir::open(dir)
            .and_then(|dir| dir.create(name))
            .map_err(|source| SinkError::Create {
                dir: dir.to_path_buf(),
                name: name.to_string(),
                source,
            })?;
        Ok(FileSink {
            file: std::io::BufWriter::with_capacity(1 << 16, file),
            written: 0,
            limit,
            error: None,
        })
    }

    /// Bytes taken so far.
    pub(crate) fn written(&self) -> u64 {
        self.written
    }

    /// Flushed; the first error of the stream (more than the limit, a full disk).
    pub(crate) fn done(mut self) -> Result<(), SinkError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        Ok(self.file.flush()?)
    }
}

impl StreamFilter for FileSink {
    fn push(&mut self, bytes: &[u8]) -> Vec<u8> {
        if self.error.is_some() {
            return Vec::new();
        }
        self.written += bytes.len() as u64;
        if self.written > self.limit {
            self.error = Some(SinkError::TooLarge(self.limit));
        } else if let Err(e) = self.file.write_all(bytes) {
            self.error = Some(SinkError::Write(e));
        }
        Vec::new()
    }

    fn finish(&mut self) -> Vec<u8> {
        Vec::new()
    }
}
