//! Host git, and only on repositories of ours: an attempt's fresh clone, a landing
//! repository for a bundle, the copy transport's stage. Never in the user's
//! repository: a worker may have written its config, hooks or info, and git would
//! run what they say (`core.fsmonitor`, `url.*.insteadOf` to `ext::`, filters,
//! hooks); its objects are only read as an alternate object store, which is data.
//!
//! No git configuration of the user's either (system, global, `GIT_*` variables):
//! the files come from worker-written branches, and the user's filter and merge
//! drivers (git-lfs reading a `.lfsconfig` there) must not run on them. The one
//! place both the sandbox's landing and the pipeline's clones run git from.

use std::path::Path;
use std::time::Duration;

use crate::interrupt::Interrupt;
use crate::process::{self, Capture, Ending, Invocation, Limits, Stop};

/// Time allowed for one git command.
pub const TIMEOUT: Duration = Duration::from_secs(300);

/// How a git command of ours failed.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("`{command}` was interrupted")]
    Interrupted { command: String },
    #[error("`{command}` timed out")]
    TimedOut { command: String },
    #[error("`{command}` failed: {stderr}")]
    Failed { command: String, stderr: String },
    /// git could not be started.
    #[error("`{command}`: {source}")]
    Start {
        command: String,
        source: crate::Error,
    },
}

/// `git <args>` in `cwd` with none of the user's git configuration or `GIT_*`
/// variables, and killed with this process: none may go on writing after it.
pub fn clean(cwd: &Path, args: &[&str]) -> Invocation {
    let mut invocation = Invocation::new("git");
    for (name, _) in std::env::vars_os() {
        if let Some(name) = name.to_str().filter(|n| n.starts_with("GIT_")) {
            invocation = invocation.env_remove(name);
        }
    }
    invocation
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_NO_REPLACE_OBJECTS", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        // Nothing is fetched or pushed; no automatic maintenance (a detached `git
        // maintenance` would outlive us), no hooks, no fsmonitor, no attributes
        // file of the user's.
        .args([
            "-c",
            "protocol.allow=never",
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.attributesFile=/dev/null",
            "-c",
            "maintenance.auto=false",
            "-c",
            "gc.auto=0",
        ])
        .args(args.iter().copied())
        .cwd(cwd)
        .die_with_parent()
}

/// `path` as one entry of a colon-separated list of git's
/// (`GIT_ALTERNATE_OBJECT_DIRECTORIES`): C-quoted if it has a colon (or starts
/// with a quote).
pub fn quoted(path: &Path) -> String {
    let text = path.display().to_string();
    if !text.contains(':') && !text.starts_with('"') {
        return text;
    }
    let mut out = String::from("\"");
    for c in text.chars() {
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// Runs a git invocation within `TIMEOUT`; its stdout (the first MiB).
pub fn run(invocation: &Invocation, interrupt: Interrupt) -> Result<String, GitError> {
    let mut stdout = String::new();
    let mut on_line = |line: &[u8]| {
        if stdout.len() < (1 << 20) {
            stdout.push_str(&String::from_utf8_lossy(line));
            stdout.push('\n');
        }
    };
    let capture = Capture::in_memory(16 * 1024).with_lines(64 * 1024, &mut on_line);
    run_captured(invocation, interrupt, capture)?;
    Ok(stdout)
}

/// Runs a git invocation within `TIMEOUT`; its whole stdout as bytes, up to `max`
/// (beyond it the command fails): for `-z` output, whose paths may be any bytes
/// and whose lines may be long.
pub fn run_bytes(
    invocation: &Invocation,
    max: usize,
    interrupt: Interrupt,
) -> Result<Vec<u8>, GitError> {
    let mut collect = Collect {
        bytes: Vec::new(),
        max,
        over: false,
    };
    let capture = Capture::in_memory(16 * 1024).with_filter(&mut collect);
    let ran = run_captured(invocation, interrupt, capture);
    // Past the bound the output is not whole, whatever git said after it.
    match ran {
        Ok(()) | Err(GitError::Failed { .. }) if collect.over => Err(GitError::Failed {
            command: invocation.display(),
            stderr: format!("it printed more than {max} bytes"),
        }),
        ran => ran.map(|()| collect.bytes),
    }
}

/// `invocation` run into `capture`: Ok when git ended by itself with success.
fn run_captured(
    invocation: &Invocation,
    interrupt: Interrupt,
    mut capture: Capture<'_>,
) -> Result<(), GitError> {
    let command = || invocation.display();
    let finished = process::run(
        invocation,
        &Limits::wall(TIMEOUT, interrupt),
        &mut capture,
        Stop::Terminate,
    )
    .map_err(|source| GitError::Start {
        command: command(),
        source,
    })?;
    let stderr = capture.stderr();
    drop(capture);
    match finished.ending {
        Ending::Interrupted => Err(GitError::Interrupted { command: command() }),
        Ending::TimedOut => Err(GitError::TimedOut { command: command() }),
        _ if finished.success() => Ok(()),
        _ => Err(GitError::Failed {
            command: command(),
            stderr: crate::text::tail(stderr.trim(), 600),
        }),
    }
}

/// A child's stdout kept whole, up to a bound.
struct Collect {
    bytes: Vec<u8>,
    max: usize,
    over: bool,
}

impl process::StreamFilter for Collect {
    fn push(&mut self, bytes: &[u8]) -> Vec<u8> {
        if self.bytes.len() + bytes.len() > self.max {
            self.over = true;
        } else {
            self.bytes.extend_from_slice(bytes);
        }
        Vec::new()
    }

    fn finish(&mut self) -> Vec<u8> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_borrowed_store_s_path_is_one_entry_of_git_s_list() {
        assert_eq!(quoted(Path::new("/a/b")), "/a/b");
        assert_eq!(quoted(Path::new("/a:b/\"c\\")), "\"/a:b/\\\"c\\\\\"");
    }

    #[test]
    fn the_user_s_global_configuration_is_not_read() {
        let dir = std::env::temp_dir().join(format!("core-git-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(".gitconfig"), "[user]\n\tname = from-the-user\n").unwrap();
        let home = dir.display().to_string();
        let args = ["config", "--get", "user.name"];
        // Plain git reads it from HOME; ours does not.
        let plain = Invocation::new("git")
            .args(args)
            .cwd(&dir)
            .env("HOME", &home)
            .env_remove("GIT_CONFIG_GLOBAL");
        assert_eq!(
            run(&plain, Interrupt::never()).unwrap().trim(),
            "from-the-user"
        );
        let ours = clean(&dir, &args).env("HOME", &home);
        let got = run(&ours, Interrupt::never());
        assert!(
            matches!(got, Err(GitError::Failed { .. })),
            "the user's name was read: {got:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
