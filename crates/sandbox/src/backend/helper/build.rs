//! Build script: compiles the egress bridge (`bridge.c`), the helper that runs inside
//! the task's container, into a static binary that agent-runner embeds.
//!
//! Why a C file and `cc -static`: it needs only gcc and glibc's static libraries
//! (Debian's libc6-dev), which building Rust on Linux already needs; the result
//! (about 0.7 MB) runs in any x86-64/arm64 Linux image, even one built FROM scratch.
//! A Rust helper would need a second target (crt-static) and is twice the size.

// A build script talks to cargo on stdout, and a missing OUT_DIR is cargo's bug.
#![allow(clippy::print_stdout, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

const SOURCE: &str = "src/backend/helper/bridge.c";

fn main() {
    println!("cargo:rerun-if-changed={SOURCE}");
    println!("cargo:rerun-if-changed=src/backend/helper/snapshot.c");
    println!("cargo:rerun-if-changed=src/backend/helper/lifeline.c");
    println!("cargo:rerun-if-changed=src/backend/helper/init.c");
    println!("cargo:rerun-if-changed=src/backend/helper/quiet.c");
    println!("cargo:rerun-if-changed=src/backend/helper/find.c");
    println!("cargo:rerun-if-changed=src/backend/helper/exec.c");
    println!("cargo:rerun-if-env-changed=CC");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let binary = out.join("egress-bridge");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let status = Command::new(&cc)
        .args(["-static", "-Os", "-s", "-Wall", "-Wextra", "-o"])
        .arg(&binary)
        .arg(SOURCE)
        .status();
    match status {
        Ok(status) if status.success() => {}
        Ok(status) => panic!(
            "`{cc} -static {SOURCE}` failed ({status}): the egress bridge needs gcc and glibc's \
             static libraries (Debian/Ubuntu: apt-get install gcc libc6-dev)"
        ),
        Err(e) => panic!(
            "cannot run `{cc}` to build the egress bridge ({e}): install gcc and libc6-dev, or set CC"
        ),
    }
}
