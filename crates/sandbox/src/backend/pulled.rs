//! A child's output, pushed to us chunk by chunk (`process::StreamFilter`), read
//! as one `Read` stream on a thread of its own, so the `tar` crate's reader (it
//! pulls) can take it as it comes: nothing is held here but a few chunks.

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use agent_runner_core::process::StreamFilter;

/// Chunks in flight between the child's reader and the stream's: a slow reader
/// holds the child up rather than this process's memory growing.
const IN_FLIGHT: usize = 16;

/// Hands a child's stdout on to a `StreamReader`, chunk by chunk; a reader that
/// went away gets nothing more.
pub(crate) struct Forward(Option<SyncSender<Vec<u8>>>);

impl Forward {
    /// A forward and the stream it feeds.
    pub(crate) fn new() -> (Forward, StreamReader) {
        let (sender, receiver) = sync_channel(IN_FLIGHT);
        (Forward(Some(sender)), StreamReader::new(receiver))
    }
}

impl StreamFilter for Forward {
    fn push(&mut self, bytes: &[u8]) -> Vec<u8> {
        if let Some(sender) = &self.0
            && sender.send(bytes.to_vec()).is_err()
        {
            self.0 = None;
        }
        Vec::new()
    }

    fn finish(&mut self) -> Vec<u8> {
        self.0 = None;
        Vec::new()
    }
}

/// The chunks `Forward` passes on, read as one stream; its end when the sender is
/// gone.
pub(crate) struct StreamReader {
    receiver: Receiver<Vec<u8>>,
    chunk: Vec<u8>,
    at: usize,
}

impl StreamReader {
    fn new(receiver: Receiver<Vec<u8>>) -> Self {
        StreamReader {
            receiver,
            chunk: Vec::new(),
            at: 0,
        }
    }
}

impl std::io::Read for StreamReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.chunk.len() {
            match self.receiver.recv() {
                Ok(chunk) => (self.chunk, self.at) = (chunk, 0),
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.chunk.len() - self.at);
        buf[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// A stream filter whose reading runs on a thread of its own: `read` takes the
/// stream and gives what it found; it may stop early (the rest is then dropped as
/// it comes). Dropped unfinished, the stream ends for `read`, and its thread with
/// it.
pub(crate) struct Pulled<T> {
    forward: Forward,
    reading: std::thread::JoinHandle<T>,
}

impl<T: Send + 'static> Pulled<T> {
    pub(crate) fn new(read: impl FnOnce(StreamReader) -> T + Send + 'static) -> Self {
        let (forward, stream) = Forward::new();
        Pulled {
            forward,
            reading: std::thread::spawn(move || read(stream)),
        }
    }

    /// What `read` found of the whole stream; None if it panicked.
    pub(crate) fn result(self) -> Option<T> {
        drop(self.forward);
        self.reading.join().ok()
    }
}

impl<T> StreamFilter for Pulled<T> {
    fn push(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.forward.push(bytes)
    }

    fn finish(&mut self) -> Vec<u8> {
        self.forward.finish()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn the_reader_gets_every_chunk_in_order_and_may_stop_early() {
        let mut whole = Pulled::new(|mut stream: StreamReader| {
            let mut all = Vec::new();
            stream.read_to_end(&mut all).unwrap();
            all
        });
        let chunks: Vec<Vec<u8>> = (0..100u8).map(|i| vec![i; 1000]).collect();
        for chunk in &chunks {
            whole.push(chunk);
        }
        whole.finish();
        assert_eq!(whole.result().unwrap(), chunks.concat());

        // A reader that stops at once does not hold the pushes up.
        let mut first = Pulled::new(|mut stream: StreamReader| {
            let mut byte = [0u8];
            stream.read_exact(&mut byte).unwrap();
            byte[0]
        });
        for chunk in &chunks {
            first.push(chunk);
        }
        assert_eq!(first.result(), Some(0));
        assert_eq!(
            Pulled::new(|mut s: StreamReader| std::io::copy(&mut s, &mut std::io::sink()).unwrap())
                .result(),
            Some(0)
        );
    }
}
