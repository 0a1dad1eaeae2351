//! What reading a task may take from the host besides the YAML: environment variables
//! and the current directory. Passed in, so tests decide what the host looks like and
//! nothing else is read.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::Error;

/// The host as seen by `parse`.
pub struct Host<'a> {
    /// Looks up an environment variable.
    pub var: &'a dyn Fn(&str) -> Option<OsString>,
    /// The current directory, or why it cannot be known (it may have been deleted).
    /// Only relative paths need it.
    pub cwd: Result<PathBuf, std::io::Error>,
}

/// An environment variable as the task sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Var {
    Unset,
    Set(String),
    /// Set, but not text: never silently treated as unset.
    NotUtf8,
}

impl Host<'static> {
    /// This process's environment and current directory.
    pub fn process() -> Self {
        fn lookup(name: &str) -> Option<OsString> {
            std::env::var_os(name)
        }
        Host {
            var: &lookup,
            cwd: std::env::current_dir(),
        }
    }
}

impl Host<'_> {
    /// The variable `name`.
    pub(crate) fn var(&self, name: &str) -> Var {
        match (self.var)(name) {
            None => Var::Unset,
            Some(value) => value.into_string().map_or(Var::NotUtf8, Var::Set),
        }
    }

    /// `path` made absolute against the current directory (not resolved further).
    pub(crate) fn absolute(&self, path: &str) -> Result<PathBuf, Error> {
        if Path::new(path).is_absolute() {
            return Ok(PathBuf::from(path));
        }
        match &self.cwd {
            Ok(cwd) => Ok(cwd.join(path)),
            Err(why) => Err(Error::NoCurrentDir {
                path: agent_runner_core::text::cut_chars(path, 60),
                why: why.to_string(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::ffi::OsStringExt;

    use super::*;

    #[test]
    fn variables_are_set_unset_or_not_text() {
        let lookup = |name: &str| match name {
            "TEXT" => Some(OsString::from("v")),
            "BYTES" => Some(OsString::from_vec(vec![b'a', 0xff])),
            _ => None,
        };
        let host = Host {
            var: &lookup,
            cwd: Err(std::io::Error::other("gone")),
        };
        assert_eq!(host.var("TEXT"), Var::Set("v".into()));
        assert_eq!(host.var("BYTES"), Var::NotUtf8);
        assert_eq!(host.var("NONE"), Var::Unset);
    }

    #[test]
    fn only_relative_paths_need_the_current_directory() {
        let host = Host {
            var: &|_| None,
            cwd: Err(std::io::Error::other("No such file or directory")),
        };
        assert_eq!(host.absolute("/abs/x").ok(), Some(PathBuf::from("/abs/x")));
        let e = host.absolute("rel").unwrap_err().to_string();
        assert!(e.contains("\"rel\" needs the current directory"), "{e}");
        assert!(e.contains("No such file or directory"), "{e}");
        let host = Host {
            var: &|_| None,
            cwd: Ok(PathBuf::from("/here")),
        };
        assert_eq!(host.absolute("rel").ok(), Some(PathBuf::from("/here/rel")));
    }
}
