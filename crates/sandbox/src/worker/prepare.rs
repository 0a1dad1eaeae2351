//! Before the first paid call (SPEC §21): the sandbox started (its main process is
//! `/bin/sh`), `task.setup` run once in it, and the test command's program found.
//! What fails here fails the task before Meta is asked anything; a test that later
//! exits 126 or 127 with "not found" is the same mistake found late
//! (`setup_error`), not a failing test to loop on.

use super::{SetupRun, TestRun};

/// Shell words that are not a program to look for.
const KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
    "in", "!", "{", "}", "function", "select", "time", "exec", "env", "command", "nice", "timeout",
    "sudo",
];

/// The program the test command runs first, when that is a plain word (`pytest` in
/// `pytest -q`): not a path (it may be the worker's to write), not a variable
/// assignment, expansion, quote or shell keyword.
pub fn program(command: &str) -> Option<&str> {
    let first = command.split_whitespace().next()?;
    let plain = first
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+'));
    (plain && !first.starts_with('-') && !KEYWORDS.contains(&first)).then_some(first)
}

/// The script that says whether `$1` is a program (or builtin) on the sandbox's
/// PATH: it prints `FOUND` or `MISSING` (shells differ in the exit code of a failed
/// `command -v`: busybox's is 127, as for a shell that could not start).
pub const FIND_PROGRAM: &str = "if command -v \"$1\" >/dev/null 2>&1; then echo agent-runner-found; else echo agent-runner-missing; fi";
/// What `FIND_PROGRAM` prints when the program is there.
pub const FOUND: &str = "agent-runner-found";
/// What `FIND_PROGRAM` prints when it is not.
pub const MISSING: &str = "agent-runner-missing";

/// Why the task stops when the test's program is not in the image.
pub fn missing(program: &str, image: &str) -> String {
    format!(
        "test command: `{program}` not found in image {image} (exit 127); add it to the image or to task.setup"
    )
}

/// Why the task stops when a stdio MCP server's command is not in the sandbox
/// (SPEC §28).
pub fn missing_mcp(server: &str, command: &str, image: &str) -> String {
    format!(
        "runner.worker.mcp_servers.{server}.command: `{command}` not found in image {image} nor agent-runner's tools volume; add it to the image or install it in task.setup"
    )
}

/// Why a test run that exited 126 or 127 saying "not found" ends the task: the
/// program (or one it runs) is not there, and no worker run will install it.
pub fn setup_error(run: &TestRun, image: &str) -> Option<String> {
    let code = run.exit_code?;
    if !(code == 126 || code == 127) || run.timed_out || run.interrupted {
        return None;
    }
    let line = run
        .output_tail
        .lines()
        .rev()
        .find(|l| l.contains("not found"))?;
    Some(format!(
        "test command: {} (exit {code}) in image {image}: a setup error, not a failing test; add it to the image or to task.setup",
        agent_runner_core::text::first_line(line.trim(), 200)
    ))
}

/// Why a setup that did not pass fails the task.
pub fn setup_failed(run: &SetupRun) -> Option<String> {
    if run.passed() {
        return None;
    }
    let how = if run.timed_out {
        format!(
            "timed out after {}",
            agent_runner_core::timestamp::human(run.duration)
        )
    } else {
        format!(
            "exit {}",
            run.exit_code.map_or("none".into(), |c| c.to_string())
        )
    };
    Some(format!(
        "setup failed ({how}): {}",
        agent_runner_core::text::first_line(&tail_lines(&run.output_tail, 3), 400)
    ))
}

/// The last `n` non-empty lines of `text`, joined with " / ".
fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines[lines.len().saturating_sub(n)..].join(" / ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_is_the_first_plain_word() {
        assert_eq!(program("pytest -q tests/"), Some("pytest"));
        assert_eq!(program("  python3 -m pytest"), Some("python3"));
        assert_eq!(program("cargo test --locked"), Some("cargo"));
        for none in [
            "./run-tests.sh",
            "FOO=1 pytest",
            "$PYTEST",
            "\"pytest\"",
            "if true; then :; fi",
            "(cd x && make)",
            "env X=1 make",
            "bin/test",
            "",
        ] {
            assert_eq!(program(none), None, "{none}");
        }
    }

    fn run(code: i32, tail: &str) -> TestRun {
        TestRun {
            number: 1,
            command: "pytest".into(),
            cwd: String::new(),
            started: agent_runner_core::timestamp::Timestamp::now(),
            duration: std::time::Duration::from_secs(1),
            exit_code: Some(code),
            timed_out: false,
            interrupted: false,
            output_tail: tail.into(),
            log_path: "/dev/null".into(),
            leftovers: None,
            privileges: Vec::new(),
        }
    }

    #[test]
    fn only_126_and_127_saying_not_found_are_setup_errors() {
        let err = setup_error(&run(127, "sh: 1: pytest: not found\n"), "img").unwrap();
        assert!(
            err.contains("pytest: not found") && err.contains("exit 127") && err.contains("img"),
            "{err}"
        );
        assert!(setup_error(&run(126, "x: not found"), "img").is_some());
        assert!(setup_error(&run(1, "E   AssertionError: name not found"), "img").is_none());
        assert!(setup_error(&run(127, "FAILED test_x.py::test_y"), "img").is_none());
    }
}
