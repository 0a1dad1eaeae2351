//! The host end against a hostile fake helper: frames written by hand into the
//! stream, what comes down read back.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use super::frame::{
    CHANNELS, CLOSE, CREDIT, DATA, EOF, FILE, FILED, Frame, MAX_DATA, OPEN, UP_WINDOW,
};
use super::mux::{Door, Down, Mux};

/// A mux whose stream's other end is ours: (mux, helper's writing end, helper's
/// reading end, the proxy's ends as the door received them).
fn harness(door: bool) -> (Mux, UnixStream, UnixStream, Receiver<UnixStream>) {
    let (up_theirs, up_ours) = UnixStream::pair().unwrap();
    let (down_ours, down_theirs) = UnixStream::pair().unwrap();
    down_theirs
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let (tx, rx) = channel();
    let tx = std::sync::Mutex::new(tx);
    let door: Option<Door> = door.then(|| {
        std::sync::Arc::new(move |stream: UnixStream| {
            let _ = tx.lock().unwrap().send(stream);
        }) as Door
    });
    let mux = Mux::start(Box::new(up_ours), Down::spawn(down_ours).unwrap(), door).unwrap();
    (mux, up_theirs, down_theirs, rx)
}

fn send(helper: &mut UnixStream, frame: Frame) {
    helper.write_all(&frame.encode()).unwrap();
}

/// The next frame down that is not a CREDIT (credits counted into `credited`).
fn next(down: &mut UnixStream, credited: &mut u32) -> Frame {
    loop {
        let frame = Frame::read(down).expect("a frame down");
        if frame.kind == CREDIT {
            *credited += frame.credit();
            continue;
        }
        return frame;
    }
}

/// The stream down ends (the sandbox's stdin closes) within 10 s.
fn ends(down: &mut UnixStream) -> bool {
    let mut rest = Vec::new();
    down.read_to_end(&mut rest).is_ok()
}

fn wait_fault(mux: &Mux) -> String {
    for _ in 0..200 {
        if let Some(fault) = mux.fault() {
            return fault;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("no fault");
}

#[test]
fn a_channel_reaches_the_door_and_carries_both_ways_then_closes() {
    let (_mux, mut helper, mut down, doors) = harness(true);
    send(&mut helper, Frame::new(OPEN, 5, vec![]));
    send(&mut helper, Frame::new(DATA, 5, b"CONNECT x:443".to_vec()));
    let mut proxy = doors.recv_timeout(Duration::from_secs(5)).unwrap();
    let mut got = [0u8; 13];
    proxy.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"CONNECT x:443");
    proxy.write_all(b"HTTP/1.1 200").unwrap();
    let mut credited = 0;
    let frame = next(&mut down, &mut credited);
    assert_eq!(
        (frame.kind, frame.channel, &frame.payload[..]),
        (DATA, 5, &b"HTTP/1.1 200"[..])
    );
    // Both directions end: the helper's EOF, the proxy's.
    send(&mut helper, Frame::new(EOF, 5, vec![]));
    proxy.shutdown(std::net::Shutdown::Write).unwrap();
    let mut rest = Vec::new();
    proxy.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "half-closed toward the proxy");
    assert_eq!(next(&mut down, &mut credited).kind, EOF);
    assert_eq!(next(&mut down, &mut credited).kind, CLOSE);
    assert_eq!(credited, 0, "credits go by the quarter window");
    // Its CLOSE frees the channel: it can be opened again.
    send(&mut helper, Frame::new(CLOSE, 5, vec![]));
    send(&mut helper, Frame::new(OPEN, 5, vec![]));
    assert!(doors.recv_timeout(Duration::from_secs(5)).is_ok());
}

#[test]
fn a_slow_connection_does_not_stall_the_others_and_its_window_is_a_bound() {
    let (mux, mut helper, mut down, doors) = harness(true);
    send(&mut helper, Frame::new(OPEN, 0, vec![]));
    send(&mut helper, Frame::new(OPEN, 1, vec![]));
    let _slow = doors.recv_timeout(Duration::from_secs(5)).unwrap();
    let mut fast = doors.recv_timeout(Duration::from_secs(5)).unwrap();
    // The slow proxy end reads nothing: its whole window waits on the host.
    let chunk = vec![1u8; MAX_DATA];
    for _ in 0..(UP_WINDOW as usize / MAX_DATA) {
        send(&mut helper, Frame::new(DATA, 0, chunk.clone()));
    }
    send(&mut helper, Frame::new(DATA, 1, b"ping".to_vec()));
    fast.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut ping = [0u8; 4];
    fast.read_exact(&mut ping).unwrap();
    assert_eq!(&ping, b"ping");
    // The slow end keeps reading nothing: once its socket is full, what is not
    // credited back reaches the window, and one frame more ends the sandbox.
    let mut sent = UP_WINDOW as u64;
    while sent < 64 * 1024 * 1024
        && helper
            .write_all(&Frame::new(DATA, 0, chunk.clone()).encode())
            .is_ok()
    {
        sent += MAX_DATA as u64;
        if mux.fault().is_some() {
            break;
        }
    }
    let fault = wait_fault(&mux);
    assert!(
        fault.starts_with("lifeline: ") && fault.contains("window"),
        "{fault}"
    );
    assert!(ends(&mut down));
}

#[test]
fn a_huge_frame_ends_the_sandbox_without_allocating_it() {
    let (mux, mut helper, mut down, _) = harness(true);
    let mut huge = Frame::new(DATA, 0, vec![]).encode();
    huge[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
    helper.write_all(&huge).unwrap();
    let fault = wait_fault(&mux);
    assert!(
        fault.contains("4294967295 bytes (at most 65536)"),
        "{fault}"
    );
    assert!(ends(&mut down), "the stream down closed");
}

#[test]
fn frames_for_channels_never_opened_out_of_range_or_twice_end_the_sandbox() {
    let cases: Vec<Vec<Frame>> = vec![
        vec![Frame::new(DATA, 3, b"x".to_vec())],
        vec![Frame::new(CREDIT, 3, 1u32.to_be_bytes().to_vec())],
        vec![Frame::new(OPEN, CHANNELS, vec![])],
        vec![Frame::new(OPEN, 2, vec![]), Frame::new(OPEN, 2, vec![])],
        vec![
            Frame::new(OPEN, 2, vec![]),
            Frame::new(CREDIT, 2, 1u32.to_be_bytes().to_vec()),
        ],
        vec![Frame::new(FILE, 0, b"\0\x02/x".to_vec())],
        vec![Frame::new(200, 0, vec![])],
    ];
    for frames in cases {
        let (mux, mut helper, mut down, _doors) = harness(true);
        for frame in &frames {
            send(&mut helper, frame.clone());
        }
        let fault = wait_fault(&mux);
        assert!(
            fault.starts_with("lifeline: the sandbox broke the protocol"),
            "{frames:?}: {fault}"
        );
        assert!(ends(&mut down));
    }
}

#[test]
fn without_egress_a_connection_is_a_protocol_error() {
    let (mux, mut helper, _down, _) = harness(false);
    send(&mut helper, Frame::new(OPEN, 0, vec![]));
    assert!(wait_fault(&mux).contains("no egress"));
}

#[test]
fn garbage_and_a_stream_that_stops_mid_frame_never_panic() {
    for garbage in [
        b"\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8 random bytes".to_vec(),
        vec![DATA, 0, 0],
        vec![0u8; 4096],
    ] {
        let (mux, mut helper, mut down, _) = harness(true);
        helper.write_all(&garbage).unwrap();
        drop(helper);
        assert!(ends(&mut down), "the stream down closed");
        assert_eq!(mux.fault().is_some(), garbage.len() > 3, "{garbage:?}");
    }
}

#[test]
fn a_file_is_delivered_as_a_file_frame_and_its_answer_awaited() {
    let (mux, mut helper, mut down, _) = harness(true);
    let answering = std::thread::spawn(move || {
        let frame = Frame::read(&mut down).unwrap();
        send(&mut helper, Frame::new(FILED, 0, vec![]));
        let second = Frame::read(&mut down).unwrap();
        send(
            &mut helper,
            Frame::new(FILED, 0, b"cannot create /x: Read-only".to_vec()),
        );
        (frame, second)
    });
    assert_eq!(mux.deliver("/run/a/login-auth.json", b"{\"k\":1}"), Ok(()));
    assert_eq!(
        mux.deliver("/x", b"y").map_err(|e| e.to_string()),
        Err("cannot create /x: Read-only".into())
    );
    let (frame, _) = answering.join().unwrap();
    assert_eq!(frame.kind, FILE);
    assert_eq!(&frame.payload[..2], &[0, 22]);
    assert_eq!(&frame.payload[2..24], b"/run/a/login-auth.json");
    assert_eq!(&frame.payload[24..], b"{\"k\":1}");
    assert!(
        mux.deliver("/y", &vec![0; MAX_DATA])
            .unwrap_err()
            .to_string()
            .contains("too large")
    );
}

#[test]
fn the_carrier_runs_the_helper_from_the_tools_volume_and_maps_delivered_files() {
    use super::super::Carrier;
    let mut link = super::Lifeline::new(None, std::time::UNIX_EPOCH + Duration::from_secs(1000));
    link.deliver(
        std::path::Path::new("/h/auth.json"),
        "/run/agent-runner/auth.json",
    );
    let main = link.main(&[
        (
            "/run/agent-runner/auth.json".into(),
            ".codex/auth.json".into(),
        ),
        ("/run/agent-runner/session".into(), ".codex/sessions".into()),
    ]);
    assert_eq!(
        main.entrypoint,
        "/agent-runner-tools/bin/agent-runner-helper"
    );
    assert_eq!(
        main.args,
        [
            "lifeline",
            "0",
            "1000",
            "/run/agent-runner/private/login-auth.json",
            ".codex/auth.json",
            "/run/agent-runner/session",
            ".codex/sessions"
        ]
    );
    assert_eq!(link.mounts(), [], "nothing of this machine is mounted");
    assert!(link.find_program("pytest"));
    assert_eq!(
        link.main(&[]).args,
        ["lifeline", "find=pytest", "0", "1000"],
        "the program to look up comes first"
    );
    assert_eq!(
        link.labels(),
        [("agent-runner.expires".to_string(), "1000".to_string())]
    );
    assert!(link.streams());
}

#[test]
fn what_came_before_a_close_still_reaches_the_proxy_and_the_close_is_answered() {
    let (_mux, mut helper, mut down, doors) = harness(true);
    send(&mut helper, Frame::new(OPEN, 9, vec![]));
    send(&mut helper, Frame::new(DATA, 9, b"last words".to_vec()));
    send(&mut helper, Frame::new(CLOSE, 9, vec![]));
    let mut proxy = doors.recv_timeout(Duration::from_secs(5)).unwrap();
    proxy
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut got = Vec::new();
    proxy.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"last words");
    let mut credited = 0;
    assert_eq!(next(&mut down, &mut credited).kind, CLOSE);
    // Freed: the channel opens again.
    send(&mut helper, Frame::new(OPEN, 9, vec![]));
    assert!(doors.recv_timeout(Duration::from_secs(5)).is_ok());
}

#[test]
fn a_helper_that_keeps_to_its_credit_sends_many_windows_and_is_credited_by_the_quarter() {
    let (mux, mut helper, mut down, doors) = harness(true);
    send(&mut helper, Frame::new(OPEN, 4, vec![]));
    let mut proxy = doors.recv_timeout(Duration::from_secs(5)).unwrap();
    let total = 5 * UP_WINDOW as usize;
    let reading = std::thread::spawn(move || {
        let mut got = Vec::new();
        proxy.read_to_end(&mut got).unwrap();
        got
    });
    // The helper's side of the flow control: never more than its credit in flight.
    let (mut credit, mut sent, mut credits) = (UP_WINDOW as usize, 0, Vec::new());
    while sent < total {
        if credit == 0 {
            let frame = Frame::read(&mut down).expect("a credit, not the end");
            assert_eq!((frame.kind, frame.channel), (CREDIT, 4), "{frame:?}");
            credit += frame.credit() as usize;
            credits.push(frame.credit());
            continue;
        }
        let n = credit.min(MAX_DATA).min(total - sent);
        let byte = (sent / MAX_DATA) as u8;
        send(&mut helper, Frame::new(DATA, 4, vec![byte; n]));
        (sent, credit) = (sent + n, credit - n);
    }
    send(&mut helper, Frame::new(EOF, 4, vec![]));
    let got = reading.join().unwrap();
    assert_eq!(got.len(), total, "every byte reached the proxy, in order");
    assert!(
        got.chunks(MAX_DATA)
            .enumerate()
            .all(|(i, c)| c.iter().all(|&b| b == i as u8))
    );
    assert!(
        credits.iter().all(|&c| c == UP_WINDOW / 4),
        "one credit a quarter window: {credits:?}"
    );
    assert_eq!(mux.fault(), None);
}
