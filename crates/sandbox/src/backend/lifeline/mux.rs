//! The host end of the lifeline's channels (the protocol: `helper/lifeline.c`).
//!
//! One thread reads the frames from the sandbox (`frame::Frame::read`, every length
//! bounded) and sorts them; one thread writes ours down (`Down`). A channel the
//! helper opens becomes a socket pair: one end is handed to the door (the egress
//! proxy, the same one, rules and log as every connection: it is the only thing a
//! channel can reach), the other is served by two threads of the channel's own, one
//! per direction, so a slow connection waits alone: what the sandbox sends waits in
//! the channel's queue, at most `UP_WINDOW` bytes (more is a protocol error), and
//! what we send waits for the helper's credit (`DOWN_WINDOW` at most in flight).
//! The writing thread sends whatever frames wait in one write, so a download moves
//! in large writes whatever the channels' reads return.
//!
//! Whatever the sandbox sends that breaks the protocol ends the stream (so the
//! sandbox) with a `lifeline: …` fault; nothing it sends can make this side panic or
//! allocate more than a frame at a time.

use std::collections::VecDeque;
use std::io::{IoSlice, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::frame::{
    Broken, CHANNELS, CLOSE, CREDIT, DATA, DOWN_WINDOW, EOF, FILE, FILED, Frame, HEADER, MAX_DATA,
    OPEN, QUIET, QUIETED, UP_WINDOW,
};

/// Where a channel goes on the host: one end of a socket pair, handed to the egress
/// proxy. Nothing else: a channel names no address.
pub type Door = Arc<dyn Fn(UnixStream) + Send + Sync>;

/// Frames queued for the writing thread.
const DOWN_QUEUE: usize = 64;
/// Most bytes of waiting frames the writing thread sends in one write.
const DOWN_BATCH: usize = 1024 * 1024;
/// Stack of a channel's threads (they only move bytes).
const CHANNEL_STACK: usize = 64 * 1024;
/// How long a file's delivery may take.
const FILE_WAIT: Duration = Duration::from_secs(30);
/// Longest wait for the answer to QUIET (the helper kills for 5 s at most).
const QUIET_WAIT: Duration = Duration::from_secs(10);

/// The way down: frames written to the sandbox's stdin by one thread, which closes
/// the stdin (ending the sandbox) on `close` or when every `Down` is gone.
#[derive(Clone)]
pub struct Down {
    queue: SyncSender<Vec<u8>>,
    closed: Arc<AtomicBool>,
}

impl Down {
    /// The writing thread of `input`.
    pub fn spawn(input: impl Write + Send + 'static) -> std::io::Result<Down> {
        let (queue, chunks) = sync_channel::<Vec<u8>>(DOWN_QUEUE);
        let closed = Arc::new(AtomicBool::new(false));
        let flag = closed.clone();
        std::thread::Builder::new()
            .name("lifeline-down".into())
            .spawn(move || write_down(input, &chunks, &flag))?;
        Ok(Down { queue, closed })
    }

    /// Queues `frame`; false once the stream is closed.
    pub(crate) fn send(&self, frame: &Frame) -> bool {
        self.send_encoded(frame.encode())
    }

    /// Queues a frame already encoded (`Frame::header` and its payload); false once the stream is closed.
    fn send_encoded(&self, bytes: Vec<u8>) -> bool {
        !self.closed.load(Ordering::SeqCst) && self.queue.send(bytes).is_ok()
    }

    /// Closes the stream: the sandbox sees its stdin end.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        // Wakes the thread if it waits; if the queue is full it sees the flag next.
        let _ = self.queue.try_send(Vec::new());
    }
}

fn write_down(mut input: impl Write, chunks: &Receiver<Vec<u8>>, closed: &AtomicBool) {
    let mut batch: Vec<Vec<u8>> = Vec::new();
    while let Ok(chunk) = chunks.recv() {
        let mut bytes = chunk.len();
        batch.push(chunk);
        while bytes < DOWN_BATCH
            && let Ok(chunk) = chunks.try_recv()
        {
            bytes += chunk.len();
            batch.push(chunk);
        }
        if closed.load(Ordering::SeqCst) || batch.iter().any(Vec::is_empty) {
            break;
        }
        if write_all(&mut input, &batch)
            .and_then(|()| input.flush())
            .is_err()
        {
            break;
        }
        batch.clear();
    }
    closed.store(true, Ordering::SeqCst);
}

/// Writes every chunk of `batch`, in order, in as few writes as it takes.
fn write_all(input: &mut impl Write, batch: &[Vec<u8>]) -> std::io::Result<()> {
    let mut slices: Vec<IoSlice> = batch.iter().map(|chunk| IoSlice::new(chunk)).collect();
    let mut slices = &mut slices[..];
    while !slices.is_empty() {
        match input.write_vectored(slices) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut slices, n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Why a file was not delivered, or QUIET not answered.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum LinkError {
    #[error("{path}: too large for the lifeline ({size} bytes, at most {most})")]
    TooLarge {
        path: String,
        size: usize,
        most: usize,
    },
    /// The helper's answer: why it could not write the file.
    #[error("{0}")]
    Refused(String),
    /// No answer in time; why this side ended the stream, if it did.
    #[error("{}", .0.as_deref().unwrap_or("the sandbox did not answer"))]
    Unanswered(Option<String>),
    #[error("the lifeline is closed")]
    Closed,
}

/// The host end; see the module documentation.
pub(crate) struct Mux {
    shared: Arc<Shared>,
}

struct Shared {
    down: Down,
    door: Option<Door>,
    channels: Mutex<Vec<Option<Arc<Channel>>>>,
    /// Where the answer to a FILE frame goes, while one is awaited.
    answers: Mutex<Option<SyncSender<String>>>,
    fault: Mutex<Option<String>>,
}

/// A channel; see the module documentation.
struct Channel {
    id: u16,
    /// Our end of the pair.
    socket: UnixStream,
    /// What we may still send down.
    credit: Mutex<u32>,
    credit_came: Condvar,
    /// What the sandbox sent, for the proxy.
    queue: Mutex<Queue>,
    queued: Condvar,
    sent_close: AtomicBool,
    got_close: AtomicBool,
    /// Directions finished (2: done).
    halves: AtomicU8,
    dead: AtomicBool,
}

#[derive(Default)]
struct Queue {
    chunks: VecDeque<Vec<u8>>,
    /// Bytes received and not yet given to the proxy (at most `UP_WINDOW`).
    bytes: u32,
    eof: bool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Mux {
    /// Serves the stream (`up` from the sandbox, `down` to it), handing each channel
    /// to `door`; without a door a channel is a protocol error.
    pub(crate) fn start(
        up: Box<dyn Read + Send>,
        down: Down,
        door: Option<Door>,
    ) -> std::io::Result<Mux> {
        let shared = Arc::new(Shared {
            down,
            door,
            channels: Mutex::new(vec![None; usize::from(CHANNELS)]),
            answers: Mutex::new(None),
            fault: Mutex::new(None),
        });
        let reading = shared.clone();
        std::thread::Builder::new()
            .name("lifeline-up".into())
            .spawn(move || read_up(up, &reading))?;
        Ok(Mux { shared })
    }

    /// Writes `content` at `path` in the sandbox (mode 0600, the helper's user, in
    /// its tmpfs); the helper's answer.
    pub(crate) fn deliver(&self, path: &str, content: &[u8]) -> Result<(), LinkError> {
        let mut payload = Vec::with_capacity(2 + path.len() + content.len());
        payload.extend_from_slice(&(path.len() as u16).to_be_bytes());
        payload.extend_from_slice(path.as_bytes());
        payload.extend_from_slice(content);
        if payload.len() > MAX_DATA || path.len() > 1024 {
            return Err(LinkError::TooLarge {
                path: path.to_string(),
                size: content.len(),
                most: MAX_DATA - 2 - path.len(),
            });
        }
        let (tx, answer) = sync_channel(1);
        *lock(&self.shared.answers) = Some(tx);
        let result = if self.shared.down.send(&Frame::new(FILE, 0, payload)) {
            match answer.recv_timeout(FILE_WAIT) {
                Ok(why) if why.is_empty() => Ok(()),
                Ok(why) => Err(LinkError::Refused(why)),
                Err(_) => Err(LinkError::Unanswered(self.fault())),
            }
        } else {
            Err(LinkError::Closed)
        };
        *lock(&self.shared.answers) = None;
        result
    }

    /// Has the helper kill every other process of the sandbox (QUIET); its answer,
    /// "FOUND LEFT".
    pub(crate) fn quiet(&self) -> Result<String, LinkError> {
        let (tx, answer) = sync_channel(1);
        *lock(&self.shared.answers) = Some(tx);
        let result = if self.shared.down.send(&Frame::new(QUIET, 0, Vec::new())) {
            answer
                .recv_timeout(QUIET_WAIT)
                .map_err(|_| LinkError::Unanswered(self.fault()))
        } else {
            Err(LinkError::Closed)
        };
        *lock(&self.shared.answers) = None;
        result
    }

    /// Why the stream was ended by this side, if it was.
    pub(crate) fn fault(&self) -> Option<String> {
        lock(&self.shared.fault).clone()
    }

    /// Closes the stream and every channel.
    pub(crate) fn stop(&self) {
        self.shared.down.close();
        self.shared.kill_all();
    }
}

impl Drop for Mux {
    fn drop(&mut self) {
        self.stop();
    }
}

fn read_up(mut up: Box<dyn Read + Send>, shared: &Arc<Shared>) {
    let mut up = std::io::BufReader::with_capacity(2 * MAX_DATA, &mut up);
    loop {
        let handled = Frame::read(&mut up).and_then(|frame| shared.handle(frame));
        match handled {
            Ok(()) => {}
            Err(Broken::Ended) => {
                shared.down.close();
                break;
            }
            Err(Broken::Protocol(what)) => {
                let fault = format!("lifeline: the sandbox broke the protocol: {what}; ending it");
                log::error!("{fault}");
                *lock(&shared.fault) = Some(fault);
                shared.down.close();
                break;
            }
        }
    }
    shared.kill_all();
    // A delivery waiting for its answer gets none.
    lock(&shared.answers).take();
}

impl Shared {
    fn handle(self: &Arc<Self>, frame: Frame) -> Result<(), Broken> {
        let id = frame.channel;
        // The answer to the one request awaited (a FILE, or a QUIET).
        if frame.kind == FILED || frame.kind == QUIETED {
            if let Some(answer) = lock(&self.answers).as_ref() {
                let _ = answer.try_send(String::from_utf8_lossy(&frame.payload).into_owned());
            }
            return Ok(());
        }
        if frame.kind == OPEN {
            return self.open(id);
        }
        let mut channels = lock(&self.channels);
        let Some(channel) = channels[usize::from(id)].clone() else {
            return Err(Broken::Protocol(format!("channel {id} is not open")));
        };
        if frame.kind == CLOSE {
            channel.got_close.store(true, Ordering::SeqCst);
            if channel.sent_close.load(Ordering::SeqCst) {
                channel.kill();
                channels[usize::from(id)] = None;
                return Ok(());
            }
            drop(channels);
            // What it sent before still reaches the proxy; nothing more goes down
            // (ours stops reading); once both directions are over, our CLOSE.
            lock(&channel.queue).eof = true;
            channel.queued.notify_all();
            let _ = channel.socket.shutdown(Shutdown::Read);
            return Ok(());
        }
        drop(channels);
        if channel.sent_close.load(Ordering::SeqCst) {
            // Sent before our CLOSE reached it.
            return Ok(());
        }
        match frame.kind {
            DATA => {
                let mut queue = lock(&channel.queue);
                if queue.eof {
                    return Err(Broken::Protocol(format!(
                        "data on channel {id} after its end"
                    )));
                }
                let bytes = queue.bytes.saturating_add(frame.payload.len() as u32);
                if bytes > UP_WINDOW {
                    return Err(Broken::Protocol(format!(
                        "channel {id} sent {bytes} bytes unacknowledged (its window is {UP_WINDOW})"
                    )));
                }
                queue.bytes = bytes;
                queue.chunks.push_back(frame.payload);
                channel.queued.notify_all();
            }
            EOF => {
                lock(&channel.queue).eof = true;
                channel.queued.notify_all();
            }
            CREDIT => {
                let mut credit = lock(&channel.credit);
                let more = credit.saturating_add(frame.credit());
                if more > DOWN_WINDOW {
                    return Err(Broken::Protocol(format!(
                        "channel {id} was credited {more} bytes (its window is {DOWN_WINDOW})"
                    )));
                }
                *credit = more;
                channel.credit_came.notify_all();
            }
            kind => return Err(Broken::Protocol(format!("a frame of kind {kind} going up"))),
        }
        Ok(())
    }

    fn open(self: &Arc<Self>, id: u16) -> Result<(), Broken> {
        let Some(door) = self.door.clone() else {
            return Err(Broken::Protocol(
                "a connection, but there is no egress".into(),
            ));
        };
        let mut channels = lock(&self.channels);
        if channels[usize::from(id)].is_some() {
            return Err(Broken::Protocol(format!("channel {id} opened twice")));
        }
        let Ok((ours, theirs)) = UnixStream::pair() else {
            // No socket here: the helper's client sees its connection closed.
            self.down.send(&Frame::new(CLOSE, id, Vec::new()));
            return Ok(());
        };
        let channel = Arc::new(Channel {
            id,
            socket: ours,
            credit: Mutex::new(DOWN_WINDOW),
            credit_came: Condvar::new(),
            queue: Mutex::new(Queue::default()),
            queued: Condvar::new(),
            sent_close: AtomicBool::new(false),
            got_close: AtomicBool::new(false),
            halves: AtomicU8::new(0),
            dead: AtomicBool::new(false),
        });
        channels[usize::from(id)] = Some(channel.clone());
        drop(channels);
        for (name, work) in [
            (
                "lifeline-to-sandbox",
                Shared::to_sandbox as fn(&Arc<Shared>, &Channel),
            ),
            ("lifeline-to-proxy", Shared::to_proxy),
        ] {
            let (shared, serving) = (self.clone(), channel.clone());
            let spawned = std::thread::Builder::new()
                .name(name.into())
                .stack_size(CHANNEL_STACK)
                .spawn(move || {
                    work(&shared, &serving);
                    shared.half_done(&serving);
                });
            if spawned.is_err() {
                channel.kill();
                self.half_done(&channel);
            }
        }
        door(theirs);
        Ok(())
    }

    /// The proxy's bytes, down as DATA within the helper's credit; then EOF.
    fn to_sandbox(self: &Arc<Self>, channel: &Channel) {
        loop {
            let allowed = {
                let mut credit = lock(&channel.credit);
                while *credit == 0 && !channel.dead.load(Ordering::SeqCst) {
                    credit = channel
                        .credit_came
                        .wait(credit)
                        .unwrap_or_else(|e| e.into_inner());
                }
                if channel.dead.load(Ordering::SeqCst) {
                    return;
                }
                (*credit as usize).min(MAX_DATA)
            };
            // Read into the frame itself: no copy between here and the stream.
            let mut frame = vec![0u8; HEADER + allowed];
            let n = match (&channel.socket).read(&mut frame[HEADER..]) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => 0,
            };
            if channel.got_close.load(Ordering::SeqCst) {
                return;
            }
            if n == 0 {
                self.down.send(&Frame::new(EOF, channel.id, Vec::new()));
                return;
            }
            *lock(&channel.credit) -= n as u32;
            frame.truncate(HEADER + n);
            frame[..HEADER].copy_from_slice(&Frame::header(DATA, channel.id, n));
            if !self.down.send_encoded(frame) {
                return;
            }
        }
    }

    /// The sandbox's bytes, to the proxy, credited back once given, by the quarter
    /// window (a credit per frame would be a frame down per frame up, and the
    /// helper still has three quarters in flight); at its EOF, a half-close.
    fn to_proxy(self: &Arc<Self>, channel: &Channel) {
        let mut owed = 0u32;
        loop {
            let chunk = {
                let mut queue = lock(&channel.queue);
                loop {
                    if channel.dead.load(Ordering::SeqCst) {
                        return;
                    }
                    if let Some(chunk) = queue.chunks.pop_front() {
                        break chunk;
                    }
                    if queue.eof {
                        let _ = channel.socket.shutdown(Shutdown::Write);
                        return;
                    }
                    queue = channel
                        .queued
                        .wait(queue)
                        .unwrap_or_else(|e| e.into_inner());
                }
            };
            if (&channel.socket).write_all(&chunk).is_err() {
                return;
            }
            lock(&channel.queue).bytes -= chunk.len() as u32;
            owed += chunk.len() as u32;
            if owed >= UP_WINDOW / 4 {
                let credit = owed.to_be_bytes().to_vec();
                self.down.send(&Frame::new(CREDIT, channel.id, credit));
                owed = 0;
            }
        }
    }

    /// A direction of `channel` is over; after both, our CLOSE (and the channel is
    /// free once the helper's came too).
    fn half_done(&self, channel: &Channel) {
        if channel.halves.fetch_add(1, Ordering::SeqCst) + 1 < 2 {
            return;
        }
        let mut channels = lock(&self.channels);
        if !channel.sent_close.swap(true, Ordering::SeqCst) {
            self.down.send(&Frame::new(CLOSE, channel.id, Vec::new()));
        }
        let slot = &mut channels[usize::from(channel.id)];
        if channel.got_close.load(Ordering::SeqCst)
            && slot.as_ref().is_some_and(|c| std::ptr::eq(&**c, channel))
        {
            *slot = None;
        }
    }

    fn kill_all(&self) {
        for channel in lock(&self.channels).iter().flatten() {
            channel.kill();
        }
    }
}

impl Channel {
    /// Ends both directions at once.
    fn kill(&self) {
        self.dead.store(true, Ordering::SeqCst);
        let _ = self.socket.shutdown(Shutdown::Both);
        // Under their locks, so a thread about to wait cannot miss it.
        drop(lock(&self.credit));
        self.credit_came.notify_all();
        drop(lock(&self.queue));
        self.queued.notify_all();
    }
}
