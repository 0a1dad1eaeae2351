//! .config/nextest.toml's `sharing-host` group holds exactly the tests that take
//! the sharing remote host's lock (`support::remote_hosts::sharing`): a test that
//! takes it outside the group still passes, but holds a test thread while it waits
//! for its turn; one in the group that no longer takes it waits for nothing.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn top() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The functions of a test file at its top level: (name, is a `#[test]`, body).
fn functions(source: &str) -> Vec<(String, bool, String)> {
    let lines: Vec<&str> = source.lines().collect();
    let starts: Vec<usize> = (0..lines.len())
        .filter(|&i| name_of(lines[i]).is_some())
        .collect();
    starts
        .iter()
        .enumerate()
        .map(|(k, &i)| {
            let end = starts.get(k + 1).copied().unwrap_or(lines.len());
            // Its attributes and doc comments are the lines right above it.
            let is_test = lines[..i]
                .iter()
                .rev()
                .take_while(|l| l.starts_with("#[") || l.starts_with("//"))
                .any(|l| l.trim() == "#[test]");
            (
                name_of(lines[i]).unwrap().to_string(),
                is_test,
                lines[i..end].join("\n"),
            )
        })
        .collect()
}

/// The name of the function a line declares at the top level of a file.
fn name_of(line: &str) -> Option<&str> {
    let rest = ["fn ", "pub fn ", "pub(crate) fn ", "pub(super) fn "]
        .iter()
        .find_map(|p| line.strip_prefix(p))?;
    rest.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .next()
}

/// `docker::<file>::<test>` of every test in tests/docker that calls `sharing()`,
/// itself or through a function of its file that does.
fn holding_the_lock() -> BTreeSet<String> {
    let dir = top().join("crates/cli/tests/docker");
    let mut found = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        let path = entry.path();
        let module = path.file_stem().unwrap().to_str().unwrap().to_string();
        let source = std::fs::read_to_string(&path).unwrap();
        let fns = functions(&source);
        let helpers: Vec<&str> = fns
            .iter()
            .filter(|(_, test, body)| !test && body.contains("sharing()"))
            .map(|(name, _, _)| name.as_str())
            .collect();
        for (name, test, body) in &fns {
            let takes = body.contains("sharing()")
                || helpers.iter().any(|h| body.contains(&format!("{h}(")));
            if *test && takes {
                found.insert(format!("docker::{module}::{name}"));
            }
        }
    }
    found
}

/// The tests `test(=…)` names in the override that puts tests in `group`.
fn in_group(config: &str, group: &str) -> BTreeSet<String> {
    let wanted = format!("test-group = \"{group}\"");
    let block = config
        .split("[[profile.default.overrides]]")
        .find(|b| b.lines().any(|l| l.trim() == wanted))
        .unwrap_or_else(|| panic!(".config/nextest.toml: no override with {wanted}"));
    block
        .split("test(=")
        .skip(1)
        .map(|rest| rest.split(')').next().unwrap().to_string())
        .collect()
}

#[test]
fn the_sharing_host_group_is_the_tests_that_take_its_lock() {
    let config = std::fs::read_to_string(top().join(".config/nextest.toml")).unwrap();
    let grouped = in_group(&config, "sharing-host");
    let holding = holding_the_lock();
    assert!(
        holding.len() >= 10,
        "the lock's takers not found: {holding:?}"
    );
    let missing: Vec<_> = holding.difference(&grouped).collect();
    let extra: Vec<_> = grouped.difference(&holding).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        ".config/nextest.toml's sharing-host group: add {missing:?}, remove {extra:?}"
    );
}

#[test]
fn a_test_taking_the_lock_through_a_helper_is_found() {
    let source = "fn helper() {\n    let _one = sharing();\n}\n\n#[test]\nfn by_helper() {\n    helper();\n}\n\n/// Doc.\n#[test]\nfn itself() {\n    let _one = sharing();\n}\n\n#[test]\nfn neither() {\n    other();\n}\n";
    let fns = functions(source);
    let names: Vec<(&str, bool)> = fns.iter().map(|(n, t, _)| (n.as_str(), *t)).collect();
    assert_eq!(
        names,
        [
            ("helper", false),
            ("by_helper", true),
            ("itself", true),
            ("neither", true)
        ]
    );
    let config = "[[profile.default.overrides]]\nfilter = '''\n  test(=docker::a::b) |\n  test(=docker::c::d)\n'''\ntest-group = \"g\"\n\n[[profile.default.overrides]]\nfilter = 'test(=docker::e::f)'\npriority = 1\n";
    assert_eq!(
        in_group(config, "g"),
        BTreeSet::from(["docker::a::b".to_string(), "docker::c::d".to_string()])
    );
}
