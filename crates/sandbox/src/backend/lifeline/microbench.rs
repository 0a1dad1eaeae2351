//! Measurement only (ignored): the mux and the C helper through a pipe pair, and
//! through `docker run -i`.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_runner_core::interrupt::Interrupt;
use agent_runner_core::process::{Invocation, spawn_held};

use super::mux::{Door, Down, Mux};

const SIZE: usize = 200 << 20;

fn helper() -> String {
    let path = format!("/tmp/ll-bench-helper-{}", std::process::id());
    std::fs::write(&path, super::super::socket::BINARY).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path
}

fn door(times: std::sync::mpsc::Sender<Duration>, upload: bool) -> Door {
    let times = Mutex::new(times);
    Arc::new(move |mut s: UnixStream| {
        let times = times.lock().unwrap().clone();
        std::thread::spawn(move || {
            let mut req = [0u8; 4096];
            let n = s.read(&mut req).unwrap_or(0);
            let start = Instant::now();
            if upload {
                let mut got = n;
                let mut buf = vec![0u8; 1 << 16];
                while got < SIZE {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => got += n,
                    }
                }
                eprintln!("got {got}");
            } else {
                let head = format!("HTTP/1.0 200 OK\r\nContent-Length: {SIZE}\r\n\r\n");
                s.write_all(head.as_bytes()).unwrap();
                let chunk = vec![b'x'; 1 << 16];
                let mut sent = 0;
                while sent < SIZE {
                    if s.write_all(&chunk).is_err() {
                        break;
                    }
                    sent += chunk.len();
                }
                let mut rest = Vec::new();
                let _ = s.read_to_end(&mut rest);
            }
            let _ = times.send(start.elapsed());
        });
    })
}

fn run(docker: bool, upload: bool) {
    let helper = helper();
    let port = 20000 + (std::process::id() % 20000) as u16;
    let client = if upload {
        format!("dd if=/dev/zero bs=65536 count={} 2>/dev/null | nc 127.0.0.1 {port}", SIZE / 65536 + 1)
    } else {
        format!("wget -q -O /dev/null http://127.0.0.1:{port}/x")
    };
    let invocation = if docker {
        Invocation::new("docker").args([
            "run", "-i", "--rm", "--init", "--log-driver", "none", "--network", "none", "-v",
            &format!("{helper}:/h:ro"), "--entrypoint", "sh", "agent-runner-test-worker:latest",
            "-c", &format!("(sleep 1; {client}) </dev/null >/dev/null 2>&1 & exec /h lifeline {port} 0"),
        ])
    } else {
        Invocation::new("sh").args([
            "-c",
            &format!("(sleep 1; docker run --rm --network host --entrypoint sh agent-runner-test-worker:latest -c '{client}') </dev/null >/dev/null 2>&1 & exec {helper} lifeline {port} 0"),
        ])
    };
    let mut held = spawn_held(&invocation).unwrap();
    held.read_line("agent-runner-ready", Duration::from_secs(30), Interrupt::never()).unwrap();
    let (input, up) = held.take_stream().unwrap();
    let (tx, rx) = channel();
    let _mux = Mux::start(Box::new(up), Down::spawn(input).unwrap(), Some(door(tx, upload))).unwrap();
    let took = rx.recv_timeout(Duration::from_secs(300)).unwrap();
    eprintln!(
        "{} {}: {:.1} MB/s ({:.2} s)",
        if docker { "docker run -i" } else { "pipes" },
        if upload { "up" } else { "down" },
        SIZE as f64 / 1e6 / took.as_secs_f64(),
        took.as_secs_f64()
    );
    drop(_mux);
    let _ = held.release(Duration::from_secs(5));
    let _ = std::fs::remove_file(helper);
}

#[test]
#[ignore]
fn pipes_down() {
    run(false, false);
}
#[test]
#[ignore]
fn pipes_up() {
    run(false, true);
}
#[test]
#[ignore]
fn docker_down() {
    run(true, false);
}
#[test]
#[ignore]
fn docker_up() {
    run(true, true);
}

/// docker run -i's stdio alone, timed from the first byte to the last.
fn raw(upload: bool) {
    use std::process::{Command, Stdio};
    let script = if upload {
        format!("dd if=/dev/zero bs=1048576 count={} 2>/dev/null", SIZE >> 20)
    } else {
        "dd bs=1 count=1 2>/dev/null >/dev/null; read a _ </proc/uptime; cat >/dev/null; read b _ </proc/uptime; echo $a $b >&2".to_string()
    };
    let mut child = Command::new("docker")
        .args(["run", "-i", "--rm", "--log-driver", "none", "--network", "none", "--entrypoint", "sh",
            "agent-runner-test-worker:latest", "-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let took = if upload {
        drop(child.stdin.take());
        let mut out = child.stdout.take().unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let n = out.read(&mut buf).unwrap();
        let start = Instant::now();
        let mut got = n;
        loop {
            match out.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
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
        let mut err = String::new();
        child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        let t: Vec<f64> = err.split_whitespace().map(|x| x.parse().unwrap()).collect();
        t[1] - t[0]
    };
    let _ = child.wait();
    eprintln!("raw {}: {:.1} MB/s ({took:.2} s)", if upload { "up" } else { "down" }, SIZE as f64 / 1e6 / took);
}

#[test]
#[ignore]
fn raw_down() {
    raw(false);
}
#[test]
#[ignore]
fn raw_up() {
    raw(true);
}
