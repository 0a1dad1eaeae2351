//! Which file runs when a host tool (`docker`, `git`, `sh`) is named without a
//! slash: the first executable regular file in an absolute `PATH` entry, looked up
//! once per name and kept for the life of the process. Relative entries (`.`, and
//! the empty ones that `PATH=$EXTRA:$PATH` leaves when EXTRA is unset) are skipped:
//! they name the current directory, which for a runner child used to be a
//! repository the worker writes, where a planted `./docker` would run on the host.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use crate::Error;

/// Where `program` runs from: itself when it names a path, else the first match in
/// an absolute directory of `PATH`. The error says why none was found.
pub fn resolve(program: &str) -> Result<PathBuf, Error> {
    if program.contains('/') {
        return Ok(PathBuf::from(program));
    }
    static FOUND: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let found = FOUND.get_or_init(Default::default);
    if let Some(path) = found.lock().ok().and_then(|f| f.get(program).cloned()) {
        return Ok(path);
    }
    let path = std::env::var_os("PATH")
        .and_then(|path| search(program, &path))
        .ok_or(Error::NotOnPath)?;
    if let Ok(mut found) = found.lock() {
        found.insert(program.to_string(), path.clone());
    }
    Ok(path)
}

/// The first executable regular file `program` in an absolute directory of `path`.
fn search(program: &str, path: &OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_path_entries_are_never_searched() {
        let base = std::env::temp_dir().join(format!("ar-program-{}", std::process::id()));
        let (planted, real) = (base.join("repo"), base.join("bin"));
        for dir in [&planted, &real] {
            std::fs::create_dir_all(dir).unwrap();
            let tool = dir.join("tool");
            std::fs::write(&tool, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::fs::write(real.join("data"), "").unwrap();
        // The planted tool, reached from the current directory.
        let relative = pathdiff(&planted);
        for path in [
            format!("{relative}:{}", real.display()),
            format!(":.:{relative}:{}", real.display()),
            format!("{}::", real.display()),
        ] {
            let found = search("tool", OsStr::new(&path));
            assert_eq!(found, Some(real.join("tool")), "PATH={path}");
        }
        assert_eq!(
            search("data", OsStr::new(&real.display().to_string())),
            None,
            "not executable"
        );
        assert_eq!(search("tool", OsStr::new(".:repo")), None);
        assert_eq!(resolve("/bin/x").ok(), Some(PathBuf::from("/bin/x")));
        std::fs::remove_dir_all(base).unwrap();
    }

    /// `dir` relative to the current directory (`../../tmp/...`).
    fn pathdiff(dir: &Path) -> String {
        let here = std::env::current_dir().unwrap();
        let ups = here.components().count() - 1;
        format!(
            "{}{}",
            "../".repeat(ups),
            dir.strip_prefix("/").unwrap().display()
        )
    }
}
