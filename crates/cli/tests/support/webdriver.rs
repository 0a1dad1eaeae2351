//! A real headless Chromium driven over WebDriver (chromedriver), for the browser
//! tests. Debian's `chromium` and `chromium-driver` are installed by
//! testdata/setup-browser.sh (`make test-env`); tests that start a browser need
//! them (`#[ignore = "needs chromium"]` and `needs!(Chromium)`, support/prerequisite.rs).
//!
//! The client is the few W3C WebDriver commands the tests need, as JSON over the
//! raw HTTP client of `web.rs`. Chromium starts with a fresh profile and without
//! any background networking (the machine's network is closed).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Scratch;
use super::prerequisite::{Needs, require};
use super::web::request;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// The key under which WebDriver returns an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A chromedriver process with one browser session; both end on drop.
pub struct Browser {
    driver: Child,
    addr: String,
    session: String,
    _profile: Scratch,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium.
    pub fn start() -> Browser {
        require(Needs::Chromium);
        let mut driver = Command::new(CHROMEDRIVER)
            .args(["--port=0", "--log-level=WARNING"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let stdout = driver.stdout.take().unwrap();
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(port) = line
                    .split("started successfully on port ")
                    .nth(1)
                    .map(|p| p.trim_end_matches('.').to_string())
                {
                    let _ = sender.send(port);
                }
            }
        });
        let port = match receiver.recv_timeout(Duration::from_secs(30)) {
            Ok(port) => port,
            Err(_) => {
                let _ = driver.kill();
                panic!("chromedriver did not say which port it listens on");
            }
        };
        let addr = format!("127.0.0.1:{port}");
        let profile = Scratch::new("chromium-profile");
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", "--no-first-run", "--disable-quic",
                    format!("--user-data-dir={}", profile.path.display()),
                    "--window-size=1280,900", "--lang=en-US",
                ],
            },
        }}});
        let mut browser = Browser {
            driver,
            addr,
            session: String::new(),
            _profile: profile,
        };
        let created = browser.call("POST", "/session", Some(capabilities));
        browser.session = created["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {created}"))
            .to_string();
        browser
    }

    /// One WebDriver command; its `value`. Panics on a WebDriver error.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let bytes = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        );
        let reply = request(&self.addr, bytes.as_bytes());
        let value = reply.json()["value"].clone();
        assert!(
            reply.status == 200,
            "WebDriver {method} {path}: {} {value}",
            reply.status
        );
        value
    }

    fn session(&self, path: &str) -> String {
        format!("/session/{}{path}", self.session)
    }

    /// Opens `url`.
    pub fn open(&self, url: &str) {
        self.call("POST", &self.session("/url"), Some(json!({ "url": url })));
    }

    /// The element `css` selects; panics if there is none.
    pub fn find(&self, css: &str) -> String {
        let found = self.call(
            "POST",
            &self.session("/element"),
            Some(json!({"using": "css selector", "value": css})),
        );
        found[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}: {found}"))
            .to_string()
    }

    /// Types `text` into the element `css` selects.
    pub fn type_into(&self, css: &str, text: &str) {
        let element = self.find(css);
        self.call(
            "POST",
            &self.session(&format!("/element/{element}/value")),
            Some(json!({ "text": text })),
        );
    }

    /// Clicks the element `css` selects.
    pub fn click(&self, css: &str) {
        let element = self.find(css);
        self.call(
            "POST",
            &self.session(&format!("/element/{element}/click")),
            Some(json!({})),
        );
    }

    /// The visible text of the element `css` selects.
    pub fn text(&self, css: &str) -> String {
        let element = self.find(css);
        self.call(
            "GET",
            &self.session(&format!("/element/{element}/text")),
            None,
        )
        .as_str()
        .unwrap_or_default()
        .to_string()
    }

    /// Runs `script` (a function body; `arguments` are `args`) in the page.
    pub fn run(&self, script: &str, args: Value) -> Value {
        self.call(
            "POST",
            &self.session("/execute/sync"),
            Some(json!({ "script": script, "args": args })),
        )
    }

    /// Waits until `script` returns something other than null or false; returns it.
    pub fn wait_for(&self, limit: Duration, script: &str, args: Value) -> Value {
        let until = Instant::now() + limit;
        loop {
            let value = self.run(script, args.clone());
            if !value.is_null() && value != Value::Bool(false) {
                return value;
            }
            assert!(
                Instant::now() < until,
                "timed out waiting in the browser for: {script}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Saves a screenshot of the page as `target/test-artifacts/<name>.png`; returns
    /// its path.
    pub fn screenshot(&self, name: &str) -> PathBuf {
        let encoded = self.call("GET", &self.session("/screenshot"), None);
        let png = base64_decode(encoded.as_str().unwrap());
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-artifacts");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        eprintln!("screenshot: {}", path.display());
        path
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let path = self.session("");
            let bytes = format!(
                "DELETE {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
                self.addr
            );
            let _ = std::panic::catch_unwind(|| request(&self.addr, bytes.as_bytes()));
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Standard base64 (WebDriver's screenshots).
pub fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        }
    };
    let clean: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    let mut out = Vec::with_capacity(clean.len() / 4 * 3);
    for chunk in clean.chunks(4) {
        let data: Vec<u8> = chunk.iter().copied().filter(|b| *b != b'=').collect();
        let mut n = 0u32;
        for (i, b) in data.iter().enumerate() {
            n |= value(*b) << (18 - 6 * i);
        }
        out.extend(&n.to_be_bytes()[1..data.len()]);
    }
    out
}
