//! Rules of the source tree that no compiler checks.
//!
//! The runner does not depend on the pipeline: the pipeline drives the runner as a
//! child process, as any other program would, so the runner must stay usable (and
//! testable) without it. Only `lib.rs` (which declares the module), the pipeline
//! commands in `src/cli/` and `error.rs` (the one place errors become exit codes) may
//! name `pipeline`.
//!
//! Untrusted files have one home, `src/fs/`: no other module opens with
//! `O_NOFOLLOW`, calls `open`/`openat` itself, creates with `O_EXCL` or takes an
//! `flock`, so the rule "never follow a symlink, never block on a FIFO, never leave
//! the directory" cannot grow a second, weaker copy.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_runner_never_imports_the_pipeline() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let allowed = [
        "lib.rs",
        "error.rs",
        "cli/mod.rs",
        "cli/workspace.rs",
        "cli/task.rs",
        "cli/orchestrate.rs",
        "cli/plan.rs",
        "cli/serve.rs",
    ];
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut offenders = Vec::new();
    for file in &files {
        let relative = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if relative.starts_with("pipeline/") || allowed.contains(&relative.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        if text.contains("pipeline::") || text.contains("mod pipeline") {
            offenders.push(relative);
        }
    }
    assert!(files.len() > 20, "found the sources");
    assert_eq!(
        offenders,
        Vec::<String>::new(),
        "these runner files use the pipeline"
    );
}

/// The source with comments, strings and char literals blanked out (so a path in a
/// doc comment or a message is not an import), `#[cfg(test)]` blocks removed.
fn code_of(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').map_or(b.len(), |n| i + n);
            i = end;
        } else if rest.starts_with("/*") {
            let end = rest.find("*/").map_or(b.len(), |n| i + n + 2);
            i = end;
        } else if rest.starts_with("r#\"") || rest.starts_with("r\"") || rest.starts_with("br\"") {
            let start = rest.find('r').unwrap() + 1;
            let hashes = rest[start..].bytes().take_while(|&c| c == b'#').count();
            let close = format!("\"{}", "#".repeat(hashes));
            let body = i + start + hashes + 1;
            let end = text[body..]
                .find(&close)
                .map_or(b.len(), |n| body + n + close.len());
            out.push_str("\"\"");
            i = end;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            i = j + 1;
        } else if b[i] == b'\'' {
            // A char literal ('x', '\n', '\u{..}'), not a lifetime ('a).
            let close = if b.get(i + 1) == Some(&b'\\') {
                text[i + 2..].find('\'').map(|n| i + 2 + n)
            } else {
                let c = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + c) == Some(&b'\'')).then_some(i + 1 + c)
            };
            match close {
                Some(end) => {
                    out.push_str("' '");
                    i = end + 1;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    // Drop `#[cfg(test)]` items (test modules and helpers): a test may reach anywhere.
    while let Some(at) = out.find("#[cfg(test)]") {
        let after = at + "#[cfg(test)]".len();
        let item_end = match (out[after..].find('{'), out[after..].find(';')) {
            (Some(brace), semi) if semi.is_none_or(|s| brace < s) => {
                let mut depth = 0;
                let mut end = out.len();
                for (n, c) in out[after + brace..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = after + brace + n + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (_, Some(semi)) => after + semi + 1,
            _ => out.len(),
        };
        out.replace_range(at..item_end, "");
    }
    out
}

/// What only `src/fs/` may write: the system calls and flags that open, create or
/// lock a file by hand.
const SAFE_FILE_CALLS: [&str; 7] = [
    "O_NOFOLLOW",
    "O_EXCL",
    "openat",
    "libc::open(",
    "flock",
    "create_new(true)",
    "AT_SYMLINK_NOFOLLOW",
];

/// The uses of `SAFE_FILE_CALLS` in the code (not comments, strings or tests) of
/// `src/` files outside `src/fs/`, as `file: call`.
fn safe_file_calls_outside_fs(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut found = Vec::new();
    for file in &files {
        let relative = file
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if relative.starts_with("fs/") {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        for call in SAFE_FILE_CALLS {
            if code.contains(call) {
                found.push(format!("{relative}: {call}"));
            }
        }
    }
    found
}

#[test]
fn only_the_fs_module_opens_untrusted_files_by_hand() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    assert_eq!(
        safe_file_calls_outside_fs(&src),
        Vec::<String>::new(),
        "go through crate::fs (src/fs/mod.rs says which part does what)"
    );
    // The check sees code, and only code: a planted call is found, a comment or a
    // test that names one is not.
    let scratch = std::env::temp_dir().join(format!("ar-arch-{}", std::process::id()));
    std::fs::create_dir_all(scratch.join("fs")).unwrap();
    std::fs::write(
        scratch.join("planted.rs"),
        "// O_NOFOLLOW in a comment\nfn f() { let _ = \"flock\"; libc::flock(0, 0); }\n\
         #[cfg(test)]\nmod tests { fn g() { libc::openat(); } }\n",
    )
    .unwrap();
    std::fs::write(scratch.join("fs/ok.rs"), "fn f() { libc::O_NOFOLLOW; }").unwrap();
    let found = safe_file_calls_outside_fs(&scratch);
    std::fs::remove_dir_all(&scratch).unwrap();
    assert_eq!(found, ["planted.rs: flock"]);
}
