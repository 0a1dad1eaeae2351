//! A micro-benchmark of the lifeline alone (no proxy, no task): the host end
//! (`Mux`) and the helper, 200 MB through a channel, timed by the door's end; as a
//! reference, `docker run -i`'s stdio without the lifeline. Figures, not checks:
//! ignored by the suite; the figures are in docs/performance.md. Run with
//!   cargo test -p agent-runner-sandbox --lib microbench -- --ignored --nocapture --test-threads 1
//! (`pipes`: the helper is a child of this process, its stdio plain pipes; `docker`:
//! the helper is the main process of a `docker run -i` of the test image; `raw`:
//! the same `docker run -i` carrying bytes alone; `down` is a download from the
//! door to busybox wget in the sandbox, `up` an upload from busybox nc).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::{Invocation, spawn_held};

use super::mux::{Door, Down, Mux};

const SIZE: usize = 200 << 20;
const IMAGE: &str = "agent-runner-test-worker:latest";

fn report(what: &str, seconds: f64) {
    eprintln!(
        "{what}: {:.1} MB/s ({seconds:.2} s)",
        SIZE as f64 / 1e6 / seconds
    );
}

/// The helper binary, written where `docker run` can mount it.
fn helper() -> String {
    let path = format!("/tmp/agent-runner-microbench-{}", std::process::id());
    std::fs::write(&path, super::super::socket::BINARY).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path
}

/// A door that serves each channel at once: SIZE bytes as an HTTP answer (down),
/// or reads SIZE bytes (up); sends the time from the request to the end.
fn door(times: Sender<Duration>, upload: bool) -> Door {
    let times = Mutex::new(times);
    Arc::new(move |mut socket: UnixStream| {
        let times = times.lock().unwrap().clone();
        std::thread::spawn(move || {
            let mut buffer = vec![0u8; 1 << 16];
            let mut got = socket.read(&mut buffer).unwrap();
            let start = Instant::now();
            if upload {
                while got < SIZE {
                    match socket.read(&mut buffer) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => got += n,
                    }
                }
                assert_eq!(got, SIZE);
            } else {
                let head = format!("HTTP/1.0 200 OK\r\nContent-Length: {SIZE}\r\n\r\n");
                socket.write_all(head.as_bytes()).unwrap();
                buffer.fill(b'x');
                for _ in 0..SIZE / buffer.len() {
                    socket.write_all(&buffer).unwrap();
                }
                // wget closes once it has it all.
                socket.read_to_end(&mut Vec::new()).unwrap();
            }
            let _ = times.send(start.elapsed());
        });
    })
}

fn lifeline(docker: bool, upload: bool) {
    let helper = helper();
    let port = 20000 + (std::process::id() % 20000) as u16;
    let client = if upload {
        format!(
            "dd if=/dev/zero bs=65536 count={} 2>/dev/null | nc 127.0.0.1 {port}",
            SIZE / 65536
        )
    } else {
        format!("wget -q -O /dev/null http://127.0.0.1:{port}/x")
    };
    let invocation = if docker {
        let script =
            format!("(sleep 1; {client}) </dev/null >/dev/null 2>&1 & exec /h lifeline {port} 0");
        let mount = format!("{helper}:/h:ro");
        Invocation::new("docker").args([
            "run",
            "-i",
            "--rm",
            "--init",
            "--log-driver",
            "none",
            "--network",
            "none",
            "-v",
            &mount,
            "--entrypoint",
            "sh",
            IMAGE,
            "-c",
            &script,
        ])
    } else {
        // The client in a container on the host's network: the helper listens here.
        let script = format!(
            "(sleep 1; docker run --rm --network host --entrypoint sh {IMAGE} -c '{client}') \
             </dev/null >/dev/null 2>&1 & exec {helper} lifeline {port} 0"
        );
        Invocation::new("sh").args(["-c", &script])
    };
    let mut held = spawn_held(&invocation).unwrap();
    held.read_line(
        "agent-runner-ready",
        Duration::from_secs(30),
        Interrupt::never(),
    )
    .unwrap();
    let (input, up) = held.take_stream().unwrap();
    let (times, took) = channel();
    let mux = Mux::start(
        Box::new(up),
        Down::spawn(input).unwrap(),
        Some(door(times, upload)),
    )
    .unwrap();
    let took = took.recv_timeout(Duration::from_secs(300)).unwrap();
    report(
        &format!(
            "lifeline, {}, {}",
            if docker { "docker run -i" } else { "pipes" },
            if upload { "up" } else { "down" }
        ),
        took.as_secs_f64(),
    );
    drop(mux);
    let _ = held.release(Duration::from_secs(5));
    let _ = std::fs::remove_file(helper);
}

/// `docker run -i`'s stdio alone, from the first byte to the last.
fn raw(upload: bool) {
    let script = if upload {
        format!(
            "dd if=/dev/zero bs=1048576 count={} 2>/dev/null",
            SIZE >> 20
        )
    } else {
        "dd bs=1 count=1 2>/dev/null >/dev/null; read a _ </proc/uptime; cat >/dev/null; \
         read b _ </proc/uptime; echo $a $b >&2"
            .to_string()
    };
    let mut child = Command::new("docker")
        .args([
            "run",
            "-i",
            "--rm",
            "--log-driver",
            "none",
            "--network",
            "none",
            "--entrypoint",
            "sh",
            IMAGE,
            "-c",
            &script,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let seconds = if upload {
        drop(child.stdin.take());
        let mut out = child.stdout.take().unwrap();
        let mut buffer = vec![0u8; 1 << 16];
        let mut got = out.read(&mut buffer).unwrap();
        let start = Instant::now();
        while let Ok(n @ 1..) = out.read(&mut buffer) {
            got += n;
        }
        assert_eq!(got, SIZE);
        start.elapsed().as_secs_f64()
    } else {
        let mut input = child.stdin.take().unwrap();
        let chunk = vec![b'x'; 1 << 16];
        for _ in 0..SIZE / chunk.len() {
            input.write_all(&chunk).unwrap();
        }
        drop(input);
        let mut times = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut times)
            .unwrap();
        let times: Vec<f64> = times
            .split_whitespace()
            .map(|t| t.parse().unwrap())
            .collect();
        times[1] - times[0]
    };
    let _ = child.wait();
    report(
        &format!("raw docker run -i, {}", if upload { "up" } else { "down" }),
        seconds,
    );
}

#[test]
#[ignore = "a micro-benchmark: run by hand"]
fn microbench_pipes_down() {
    lifeline(false, false);
}

#[test]
#[ignore = "a micro-benchmark: run by hand"]
fn microbench_pipes_up() {
    lifeline(false, true);
}

#[test]
#[ignore = "a micro-benchmark: run by hand"]
fn microbench_docker_down() {
    lifeline(true, false);
}

#[test]
#[ignore = "a micro-benchmark: run by hand"]
fn microbench_docker_up() {
    lifeline(true, true);
}

#[test]
#[ignore = "a micro-benchmark: run by hand"]
fn microbench_raw_down() {
    raw(false);
}

#[test]
#[ignore = "a micro-benchmark: run by hand"]
fn microbench_raw_up() {
    raw(true);
}
