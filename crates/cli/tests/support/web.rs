//! The web view under test: `agent-runner serve` started on 127.0.0.1 with a free
//! port, and a raw HTTP/1.1 client that sends exactly the bytes a test means
//! (encoded `..`, a foreign Host, a missing token), which a higher-level client
//! would normalise or refuse to send.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;

use super::pipeline::Pipeline;
use super::prerequisite::{Needs, require};
use super::{Run, Running};

/// A running `serve`.
pub struct Served {
    pub running: Running,
    /// `127.0.0.1:<port>`.
    pub addr: String,
    /// What it printed on stderr so far is read by `stderr()` after it ends.
    stdout: Option<std::process::ChildStdout>,
}

impl Served {
    /// `serve -w <root> --addr 127.0.0.1:0` and `extra`, waiting for its URL.
    pub fn start(p: &Pipeline, extra: &[&str]) -> Served {
        let mut args = vec!["--addr", "127.0.0.1:0"];
        args.extend(extra);
        Served::start_run(p.in_ws(&["serve"], &args))
    }

    /// `serve` as `run` starts it (with `--addr 127.0.0.1:0`), waiting for its URL.
    pub fn start_run(run: Run) -> Served {
        let mut running = run.env("RUST_LOG", "info").start();
        let (line, stdout) = first_line(&mut running);
        let addr = line
            .trim()
            .strip_prefix("http://")
            .and_then(|a| a.strip_suffix('/'))
            .unwrap_or_else(|| panic!("a URL on stdout, not {line:?}"))
            .to_string();
        Served {
            running,
            addr,
            stdout: Some(stdout),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// GET `path` with our Host.
    pub fn get(&self, path: &str) -> Reply {
        self.raw(format!("GET {path} HTTP/1.1\r\nHost: {}\r\n\r\n", self.addr).as_bytes())
    }

    /// The token embedded in the index page.
    pub fn token(&self) -> String {
        let page = self.get("/").text();
        let at = page
            .find("name=\"agent-runner-token\" content=\"")
            .expect("the token in the page")
            + 35;
        page[at..at + 64].to_string()
    }

    /// POST `body` (JSON) to `path` as our own page would: Host, Origin, token.
    pub fn post(&self, path: &str, token: &str, body: &str) -> Reply {
        self.post_with(path, &[("X-Agent-Runner-Token", token)], body)
    }

    /// POST with our Host, Origin and JSON content type, and `headers`.
    pub fn post_with(&self, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
        let mut head = format!(
            "POST {path} HTTP/1.1\r\nHost: {0}\r\nOrigin: http://{0}\r\nContent-Type: application/json\r\nContent-Length: {1}\r\n",
            self.addr,
            body.len()
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body.as_bytes());
        self.raw(&bytes)
    }

    /// Sends `bytes` as they are and reads the whole answer.
    pub fn raw(&self, bytes: &[u8]) -> Reply {
        request(&self.addr, bytes)
    }

    /// Stops the server with SIGTERM and returns its exit code and stderr.
    pub fn stop(mut self) -> (Option<i32>, String) {
        let pid = self.running.id();
        signal(pid, 15);
        drop(self.stdout.take());
        let out = self.running.finish();
        (out.code, out.stderr)
    }
}

/// The first line `running` prints on stdout (its URL), and the rest of its stdout.
/// Fails the test if none comes within 20 s.
pub fn first_line(running: &mut Running) -> (String, std::process::ChildStdout) {
    let stdout = running.child().stdout.take().unwrap();
    let mut reader = BufReader::new(stdout);
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = reader.read_line(&mut line);
        let _ = sender.send((line, reader.into_inner()));
    });
    receiver
        .recv_timeout(Duration::from_secs(20))
        .expect("serve printed its URL")
}

/// Sends `signal` to process `pid`.
pub fn signal(pid: u32, signal: i32) {
    let ok = std::process::Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

/// An HTTP answer.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    /// Names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Asserts the status, showing the body when it is wrong.
    pub fn status(&self, expected: u16) -> &Self {
        assert_eq!(self.status, expected, "body: {}", self.text());
        self
    }
}

/// `bash -c script` as user `uid` (through `setpriv`), under the usual deadline.
/// Tests that use it need root (`#[ignore = "needs root"]`).
pub fn bash_as(uid: u32, script: &str) -> Run {
    require(Needs::Root);
    let id = uid.to_string();
    Run::program(
        "setpriv",
        &[
            "--reuid",
            &id,
            "--regid",
            &id,
            "--clear-groups",
            "bash",
            "-c",
            script,
        ],
    )
}

/// Sends `bytes` to `addr` as user `uid` (through `setpriv` and bash's `/dev/tcp`)
/// and reads the answer. Tests that use it need root (`#[ignore = "needs root"]`).
pub fn request_as(uid: u32, addr: &str, bytes: &[u8]) -> Reply {
    require(Needs::Root);
    let (host, port) = addr.rsplit_once(':').unwrap();
    let id = uid.to_string();
    let script = format!("exec 3<>/dev/tcp/{host}/{port} && cat >&3 && exec cat <&3");
    let out = Run::program(
        "setpriv",
        &[
            "--reuid",
            &id,
            "--regid",
            &id,
            "--clear-groups",
            "bash",
            "-c",
            &script,
        ],
    )
    .stdin(bytes)
    .deadline(Duration::from_secs(60))
    .output();
    out.code(0);
    parse(out.stdout.as_bytes())
}

/// Sends `bytes` to `addr` and reads the answer: its head, then Content-Length bytes
/// (or up to the close, without one). Some servers (chromedriver) keep the
/// connection open whatever they say.
pub fn request(addr: &str, bytes: &[u8]) -> Reply {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    stream.write_all(bytes).unwrap();
    let mut answer = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        if let Some(end) = answer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&answer[..end]).to_ascii_lowercase();
            let length = head.lines().find_map(|l| {
                l.strip_prefix("content-length:")
                    .and_then(|v| v.trim().parse::<usize>().ok())
            });
            if length.is_some_and(|n| answer.len() >= end + 4 + n) {
                break;
            }
        }
        // A server may close before reading everything we sent (413): what it
        // answered is still there to read, up to a reset.
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => answer.extend_from_slice(&chunk[..n]),
        }
    }
    parse(&answer)
}

fn parse(answer: &[u8]) -> Reply {
    let end = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no head in {:?}", String::from_utf8_lossy(answer)));
    let head = std::str::from_utf8(&answer[..end]).unwrap();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.to_ascii_lowercase(), v.trim().to_string())
        })
        .collect();
    let body = answer[end + 4..].to_vec();
    if let Some(length) = headers.iter().find(|(n, _)| n == "content-length") {
        assert_eq!(
            length.1.parse::<usize>().unwrap(),
            body.len(),
            "Content-Length"
        );
    }
    Reply {
        status,
        headers,
        body,
    }
}
