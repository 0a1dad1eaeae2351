//! The task id rule, the one every entry point applies (the Task YAML, `task new
//! --id`, the web view, the TaskStore's reader). An id names the Task Note, the
//! container, the TaskStore's file and an isolated attempt's branch
//! `agent-runner/<id>`, so it is SPEC §3.1's pattern
//! `[A-Za-z0-9][A-Za-z0-9._-]{0,127}` (a file name, never a path) narrowed by what
//! `git check-ref-format` refuses in such a name: `..` anywhere, a trailing `.` and
//! a trailing `.lock`. (Its other rules are about characters the pattern already
//! excludes.) An id git refuses would fail every isolated attempt with a raw git
//! error, after the task was accepted.

/// The rule in words, for error messages.
pub const RULE: &str = "1-128 characters of A-Z a-z 0-9 . _ -, starting with a letter or digit, without `..` and not ending in `.` or `.lock` (it names the git branch agent-runner/<id>)";

/// True when `id` may name a task.
pub fn is_valid(id: &str) -> bool {
    id.len() <= 128
        && id.starts_with(|c: char| c.is_ascii_alphanumeric())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && !id.contains("..")
        && !id.ends_with('.')
        && !id.ends_with(".lock")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_file_names_and_branch_names() {
        for good in [
            "t-1234abcd",
            "golden-todo-001",
            "A.b_c-9",
            "x.locked",
            "lock",
            "a.lock-b",
            &"x".repeat(128),
        ] {
            assert!(is_valid(good), "{good}");
        }
        for bad in [
            "",
            "../x",
            "a/b",
            "-a",
            ".hidden",
            "a b",
            "é",
            "a..b",
            "a.",
            "x.lock",
            "a@{1}",
            &"x".repeat(129),
        ] {
            assert!(!is_valid(bad), "{bad}");
        }
    }

    /// The rule agrees with git itself on every id of the pattern built from the
    /// characters that matter (dots, `lock`, the others), up to four characters.
    #[test]
    fn the_rule_is_gits_on_ids_of_the_pattern() {
        let alphabet: Vec<char> = "a.-_l0".chars().collect();
        let mut ids: Vec<String> = vec![
            "x.lock".into(),
            "a.lock.lock".into(),
            "a.LOCK".into(),
            "lock".into(),
            ".lock".into(),
        ];
        for len in 1..=4 {
            let mut n = vec![0usize; len];
            loop {
                ids.push(n.iter().map(|&i| alphabet[i]).collect());
                let Some(i) = n.iter().rposition(|&i| i + 1 < alphabet.len()) else {
                    break;
                };
                n[i] += 1;
                n[i + 1..].iter_mut().for_each(|d| *d = 0);
            }
        }
        let pattern = |id: &str| {
            id.starts_with(|c: char| c.is_ascii_alphanumeric())
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        };
        // One git process checks them all: `--stdin` is not in every git, so a shell
        // loop prints one verdict per line.
        let candidates: Vec<&String> = ids.iter().filter(|id| pattern(id)).collect();
        let input: String = candidates.iter().map(|id| format!("{id}\n")).collect();
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "while read -r id; do if git check-ref-format \"refs/heads/agent-runner/$id\"; then echo ok; else echo bad; fi; done",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("sh and git");
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), input.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        let verdicts: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
        assert_eq!(verdicts.len(), candidates.len(), "git answered for each id");
        for (id, verdict) in candidates.iter().zip(verdicts) {
            assert_eq!(is_valid(id), verdict == "ok", "{id}: git says {verdict}");
        }
    }
}
