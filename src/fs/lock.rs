//! Advisory whole-file locks (`flock`), the one way our processes take turns on a
//! file: the kernel releases a lock however its holder ends (SIGKILL included), and
//! a reused pid holds none. A held lock's file says who holds it, for messages.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;

use crate::timestamp::Timestamp;

/// An exclusive lock on `file`, waited for (through EINTR).
pub fn lock(file: &File) -> std::io::Result<()> {
    loop {
        // SAFETY: flock on a descriptor the caller owns; no memory effects.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Takes `kind` (`LOCK_SH`, `LOCK_EX`) on `file` without waiting: false when another
/// holder has it.
pub fn try_lock(file: &File, kind: libc::c_int) -> std::io::Result<bool> {
    // SAFETY: flock on a descriptor the caller owns; no memory effects.
    if unsafe { libc::flock(file.as_raw_fd(), kind | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// Who holds the lock, as its holder wrote it (`write_holder`): one line, escaped,
/// at most `max` bytes read.
pub fn holder(mut file: &File, max: u64) -> String {
    let mut text = String::new();
    let _ = file.rewind();
    let _ = file.take(max).read_to_string(&mut text);
    crate::text::escape_controls(&crate::text::one_line(&text))
}

/// Says in `file` (whose lock we hold) that this process holds it.
pub fn write_holder(mut file: &File) -> std::io::Result<()> {
    let text = format!(
        "pid {} on {} since {}\n",
        std::process::id(),
        crate::sys::hostname(),
        Timestamp::now()
    );
    file.set_len(0)?;
    file.rewind()?;
    file.write_all(text.as_bytes())
}
