//! The system calls on descriptors that the rest of `fs` is built from, each with
//! the rule applied: every open is `O_NOFOLLOW | O_CLOEXEC`, every stat is of the
//! entry itself (`AT_SYMLINK_NOFOLLOW`), and names are single components.

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// A single path component as a C string: no separators, not `.` or `..`, no NUL.
pub(super) fn name(name: &str) -> std::io::Result<CString> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{name:?} is not a single file name"),
        ));
    }
    CString::new(name).map_err(|_| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "name contains a NUL byte")
    })
}

/// Opens a path (a directory, as the root of what is reached from it); a symlink
/// as its last component is an error (ELOOP).
pub(super) fn open_path(path: &Path, flags: libc::c_int) -> std::io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "path contains a NUL byte")
    })?;
    // SAFETY: NUL-terminated path; the result is checked.
    let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_NOFOLLOW | libc::O_CLOEXEC) };
    owned(fd)
}

/// Opens the entry `name` of `dir`, never through a symlink.
pub(super) fn open_at(
    dir: &OwnedFd,
    name: &CStr,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> std::io::Result<OwnedFd> {
    // SAFETY: valid descriptor and NUL-terminated name; the result is checked.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            libc::c_uint::from(mode),
        )
    };
    owned(fd)
}

fn owned(fd: libc::c_int) -> std::io::Result<OwnedFd> {
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The status of the entry `name` of `dir` itself (a symlink is not followed).
pub(super) fn stat_at(dir: &OwnedFd, name: &CStr) -> std::io::Result<libc::stat> {
    // SAFETY: zeroed stat is a valid out-parameter; valid descriptor and name.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        Ok(st)
    }
}

/// The target of the symlink `name` of `dir`, as bytes.
pub(super) fn read_link_at(dir: &OwnedFd, name: &CStr) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; 4096];
    loop {
        // SAFETY: valid descriptor and name; the buffer's length is passed.
        let n = unsafe {
            libc::readlinkat(
                dir.as_raw_fd(),
                name.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        let n = usize::try_from(n).map_err(|_| std::io::Error::last_os_error())?;
        if n < buf.len() {
            buf.truncate(n);
            return Ok(buf);
        }
        // Perhaps cut short: again with room to spare.
        buf.resize(buf.len() * 2, 0);
    }
}

/// The status of an open descriptor.
pub(super) fn stat(fd: &OwnedFd) -> std::io::Result<libc::stat> {
    // SAFETY: zeroed stat is a valid out-parameter.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd.as_raw_fd(), &mut st) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(st)
    }
}

/// Creates the directory `name` in `dir`.
pub(super) fn mkdir_at(dir: &OwnedFd, name: &CStr, mode: libc::mode_t) -> std::io::Result<()> {
    // SAFETY: valid descriptor and NUL-terminated name.
    if unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Removes the non-directory entry `name` of `dir`.
pub(super) fn unlink_at(dir: &OwnedFd, name: &CStr) -> std::io::Result<()> {
    // SAFETY: valid descriptor and NUL-terminated name.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Renames `from` to `to`, both in `dir`.
pub(super) fn rename_at(dir: &OwnedFd, from: &CStr, to: &CStr) -> std::io::Result<()> {
    // SAFETY: valid descriptors and NUL-terminated names.
    let r = unsafe { libc::renameat(dir.as_raw_fd(), from.as_ptr(), dir.as_raw_fd(), to.as_ptr()) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The entries of `dir` (names and `d_type`), without `.` and `..`.
pub(super) fn list(dir: &OwnedFd) -> std::io::Result<Vec<(CString, u8)>> {
    let mut out = Vec::new();
    // SAFETY: dup gives fdopendir a descriptor of its own, which closedir closes;
    // readdir's entries are copied before the next call; errno is cleared before
    // each readdir so its end and its failure can be told apart.
    unsafe {
        let fd = libc::dup(dir.as_raw_fd());
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let stream = libc::fdopendir(fd);
        if stream.is_null() {
            let e = std::io::Error::last_os_error();
            libc::close(fd);
            return Err(e);
        }
        let result = loop {
            *libc::__errno_location() = 0;
            let entry = libc::readdir(stream);
            if entry.is_null() {
                let errno = *libc::__errno_location();
                break if errno != 0 {
                    Err(std::io::Error::from_raw_os_error(errno))
                } else {
                    Ok(())
                };
            }
            let name = CStr::from_ptr((*entry).d_name.as_ptr());
            if name.to_bytes() != b"." && name.to_bytes() != b".." {
                out.push((name.to_owned(), (*entry).d_type));
            }
        };
        libc::closedir(stream);
        result?;
    }
    Ok(out)
}

/// The `d_type` of a file of mode `mode`.
pub(super) fn type_of(mode: libc::mode_t) -> u8 {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => libc::DT_DIR,
        libc::S_IFREG => libc::DT_REG,
        libc::S_IFCHR => libc::DT_CHR,
        libc::S_IFBLK => libc::DT_BLK,
        libc::S_IFLNK => libc::DT_LNK,
        _ => libc::DT_UNKNOWN,
    }
}

/// The `d_type` of `name` in `dir` as `list` gave it, asked of the entry itself
/// where the filesystem did not say (`DT_UNKNOWN`); None if it is gone.
pub(super) fn known_type(dir: &OwnedFd, name: &CStr, d_type: u8) -> Option<u8> {
    match d_type {
        libc::DT_UNKNOWN => stat_at(dir, name).ok().map(|st| type_of(st.st_mode)),
        known => Some(known),
    }
}
