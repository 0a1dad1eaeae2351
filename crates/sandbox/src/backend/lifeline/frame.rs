//! The lifeline's frames (`helper/lifeline.c` documents the protocol; both ends keep
//! these numbers): what a frame is, how one is written, and how one is read from a
//! stream whose content is hostile (the worker is root in the sandbox and can
//! replace the helper): every length bounded before anything is allocated, every
//! field checked, and any breach a `Broken` that ends the sandbox.

use std::io::Read;

pub(crate) const OPEN: u8 = 1;
pub(crate) const DATA: u8 = 2;
pub(crate) const EOF: u8 = 3;
pub(crate) const CLOSE: u8 = 4;
pub(crate) const CREDIT: u8 = 5;
pub(crate) const FILE: u8 = 6;
pub(crate) const FILED: u8 = 7;
pub(crate) const QUIET: u8 = 8;
pub(crate) const QUIETED: u8 = 9;

pub(crate) const HEADER: usize = 8;
/// Channels at a time: more than the proxy's own limit, so that the proxy (which
/// answers why) refuses the one too many.
pub(crate) const CHANNELS: u16 = 128;
/// Longest payload of a frame.
pub(crate) const MAX_DATA: usize = 65536;
/// Bytes of DATA this side may have sent down a channel and not yet had credited:
/// they wait in the helper's memory (the sandbox's). The larger window: a direction
/// moves at most a window per round trip, and the credits of this one come back
/// over the container's stdout, docker's slow direction (bench/lifeline.py).
pub(crate) const DOWN_WINDOW: u32 = 4096 * 1024;
/// Bytes of DATA the helper may have sent up a channel and not yet had credited:
/// they wait in this machine's memory, so a hostile sandbox holds at most
/// `CHANNELS` times this here.
pub(crate) const UP_WINDOW: u32 = 512 * 1024;

/// A frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Frame {
    pub(crate) kind: u8,
    pub(crate) channel: u16,
    pub(crate) payload: Vec<u8>,
}

/// How the stream from the sandbox broke the protocol, or ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Broken {
    /// The stream ended (between frames, or inside one).
    Ended,
    Protocol(String),
}

impl Frame {
    pub(crate) fn new(kind: u8, channel: u16, payload: Vec<u8>) -> Frame {
        Frame {
            kind,
            channel,
            payload,
        }
    }

    /// Its bytes on the stream. A payload is at most `MAX_DATA` long (callers cut).
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(HEADER + self.payload.len());
        bytes.extend_from_slice(&Frame::header(self.kind, self.channel, self.payload.len()));
        bytes.extend_from_slice(&self.payload);
        bytes
    }

    /// The header of a frame of `kind` on `channel` with `length` bytes of payload.
    pub(crate) fn header(kind: u8, channel: u16, length: usize) -> [u8; HEADER] {
        let [c0, c1] = channel.to_be_bytes();
        let [l0, l1, l2, l3] = (length as u32).to_be_bytes();
        [kind, 0, c0, c1, l0, l1, l2, l3]
    }

    /// The next frame of `stream`: its header checked (kind, channel, length)
    /// before its payload is read.
    pub(crate) fn read(stream: &mut impl Read) -> Result<Frame, Broken> {
        let mut header = [0u8; HEADER];
        stream.read_exact(&mut header).map_err(|_| Broken::Ended)?;
        let kind = header[0];
        let channel = u16::from_be_bytes([header[2], header[3]]);
        let length = u32::from_be_bytes([header[4], header[5], header[6], header[7]]) as usize;
        if !(OPEN..=QUIETED).contains(&kind) {
            return Err(Broken::Protocol(format!("a frame of unknown kind {kind}")));
        }
        if length > MAX_DATA {
            return Err(Broken::Protocol(format!(
                "a frame of {length} bytes (at most {MAX_DATA})"
            )));
        }
        if kind != FILED && channel >= CHANNELS {
            return Err(Broken::Protocol(format!(
                "channel {channel} (at most {} channels)",
                CHANNELS
            )));
        }
        let fixed = match kind {
            OPEN | EOF | CLOSE | QUIET => Some(0),
            CREDIT => Some(4),
            _ => None,
        };
        if fixed.is_some_and(|fixed| fixed != length) {
            return Err(Broken::Protocol(format!(
                "a frame of kind {kind} with {length} bytes"
            )));
        }
        let mut payload = vec![0u8; length];
        stream.read_exact(&mut payload).map_err(|_| Broken::Ended)?;
        Ok(Frame::new(kind, channel, payload))
    }

    /// The amount of a CREDIT frame.
    pub(crate) fn credit(&self) -> u32 {
        let mut amount = [0u8; 4];
        amount.copy_from_slice(&self.payload[..4.min(self.payload.len())]);
        u32::from_be_bytes(amount)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(bytes: &[u8]) -> Result<Frame, Broken> {
        Frame::read(&mut &bytes[..])
    }

    #[test]
    fn a_frame_reads_back_as_written() {
        for frame in [
            Frame::new(OPEN, 3, vec![]),
            Frame::new(DATA, 63, vec![7; MAX_DATA]),
            Frame::new(CREDIT, 0, 1234u32.to_be_bytes().to_vec()),
            Frame::new(FILED, 0, b"cannot create".to_vec()),
            Frame::new(FILE, 0, b"\0\x02/x".to_vec()),
            Frame::new(QUIET, 0, vec![]),
            Frame::new(QUIETED, 0, b"2 0".to_vec()),
        ] {
            assert_eq!(read(&frame.encode()), Ok(frame));
        }
        assert_eq!(
            Frame::new(CREDIT, 1, 9u32.to_be_bytes().to_vec()).credit(),
            9
        );
    }

    #[test]
    fn a_length_beyond_the_bound_is_refused_before_anything_is_allocated() {
        let mut huge = Frame::new(DATA, 1, vec![]).encode();
        huge[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        // Nothing follows the header: had it tried to read 4 GiB it would say Ended.
        assert_eq!(
            read(&huge),
            Err(Broken::Protocol(
                "a frame of 4294967295 bytes (at most 65536)".into()
            ))
        );
        let mut one_more = Frame::new(DATA, 1, vec![]).encode();
        one_more[4..8].copy_from_slice(&(MAX_DATA as u32 + 1).to_be_bytes());
        assert!(matches!(read(&one_more), Err(Broken::Protocol(_))));
    }

    #[test]
    fn unknown_kinds_channels_out_of_range_and_bad_sizes_are_refused() {
        let bad = [
            Frame::new(99, 0, vec![]),
            Frame::new(0, 0, vec![]),
            Frame::new(DATA, CHANNELS, vec![1]),
            Frame::new(OPEN, 0, vec![1]),
            Frame::new(CREDIT, 0, vec![1, 2]),
        ];
        for frame in bad {
            assert!(
                matches!(read(&frame.encode()), Err(Broken::Protocol(_))),
                "{frame:?}"
            );
        }
        assert_eq!(read(&[DATA, 0, 0]), Err(Broken::Ended));
        let mut cut = Frame::new(DATA, 0, vec![1; 10]).encode();
        cut.truncate(12);
        assert_eq!(read(&cut), Err(Broken::Ended));
    }

    #[test]
    fn the_helper_keeps_the_same_numbers() {
        let source = include_str!("../helper/lifeline.c");
        let define = |name: &str| -> u64 {
            let line = source
                .lines()
                .find_map(|l| l.strip_prefix(&format!("#define {name} ")))
                .unwrap_or_else(|| panic!("{name} is not defined in lifeline.c"));
            line.trim_matches(|c| c == '(' || c == ')' || c == ' ')
                .split('*')
                .map(|n| n.trim().parse::<u64>().unwrap())
                .product()
        };
        let kinds = [OPEN, DATA, EOF, CLOSE, CREDIT, FILE, FILED, QUIET, QUIETED];
        let names = [
            "OPEN", "DATA", "EOF", "CLOSE", "CREDIT", "FILE", "FILED", "QUIET", "QUIETED",
        ];
        for (kind, name) in kinds.iter().zip(names) {
            assert_eq!(define(&format!("LL_{name}")), u64::from(*kind), "{name}");
        }
        assert_eq!(define("LL_HEADER"), HEADER as u64);
        assert_eq!(define("LL_CHANNELS"), u64::from(CHANNELS));
        assert_eq!(define("LL_MAX_DATA"), MAX_DATA as u64);
        assert_eq!(define("LL_WINDOW_DOWN"), u64::from(DOWN_WINDOW));
        assert_eq!(define("LL_WINDOW_UP"), u64::from(UP_WINDOW));
    }

    #[test]
    fn garbage_never_panics() {
        fn prop(bytes: Vec<u8>) -> bool {
            let mut stream = &bytes[..];
            for _ in 0..64 {
                if Frame::read(&mut stream).is_err() {
                    break;
                }
            }
            true
        }
        quickcheck::quickcheck(prop as fn(Vec<u8>) -> bool);
    }
}
