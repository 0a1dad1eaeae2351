//! What the task takes from the host: environment variables (set, unset, or not
//! text), the current directory (only when a relative path needs it), repo paths safe
//! for docker, codex auth, and secrets masked in the task's texts before any cut.

use std::os::unix::ffi::OsStringExt;

use super::*;

fn bytes(b: &[u8]) -> OsString {
    OsString::from_vec(b.to_vec())
}

fn key() -> (&'static str, OsString) {
    (KEY.0, OsString::from(KEY.1))
}

#[test]
fn non_utf8_variables_are_errors_not_unset() {
    let dir = Scratch::new();
    let cwd = || Ok(dir.0.clone());
    let base = "version: 1\ntask: {prd: {text: x}}\n";
    // A binary OPENAI_BASE_URL must not fall back to the default endpoint.
    let errors = parse_on(
        cwd(),
        &[key(), ("OPENAI_BASE_URL", bytes(b"http://\xff"))],
        base,
    )
    .unwrap_err();
    assert_eq!(
        summary(&errors),
        [("OPENAI_BASE_URL".to_string(), Category::Environment)]
    );
    assert!(errors.to_string().contains("not valid UTF-8"), "{errors}");
    let errors = parse_on(cwd(), &[("OPENAI_API_KEY", bytes(b"sk-\xff"))], base).unwrap_err();
    assert_error(
        &first(errors),
        "runner.meta.api_key",
        "OPENAI_API_KEY is not valid UTF-8",
    );
    let errors =
        parse_on(cwd(), &[key(), ("META_TIMEOUT_SEC", bytes(b"6\xff"))], base).unwrap_err();
    assert_error(&first(errors), "META_TIMEOUT_SEC", "not valid UTF-8");
    let yaml = format!("{base}runner: {{worker: {{env: {{T: 'env:TOKEN'}}}}}}\n");
    let errors = parse_on(cwd(), &[key(), ("TOKEN", bytes(b"\xfe"))], &yaml).unwrap_err();
    assert_error(
        &first(errors),
        "runner.worker.env.T",
        "TOKEN is not valid UTF-8",
    );
    // An unusable base URL from the host is the host's problem, named as such.
    let errors =
        parse_on(cwd(), &[key(), ("OPENAI_BASE_URL", "ftp://x".into())], base).unwrap_err();
    let e = first(errors);
    assert_eq!(e.category, Category::Environment);
    assert_error(&e, "OPENAI_BASE_URL", "http://");
}

#[test]
fn a_missing_current_directory_fails_only_relative_paths() {
    let dir = Scratch::new();
    dir.file("prd.md", b"Build it.\n");
    dir.file("script.yaml", b"[]\n");
    let gone = || Err(std::io::Error::from_raw_os_error(libc::ENOENT));
    let abs = dir.0.display().to_string();
    let task = parse_on(
        gone(),
        &[key()],
        &format!(
            "version: 1\ntask: {{repo: {abs:?}, prd: {{path: {:?}}}}}\n",
            format!("{abs}/prd.md")
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(task.repo, dir.0);
    let task = parse_on(
        gone(),
        &[],
        &format!(
            "task: {{id: a, title: t, instructions: i, project: {{root_dir: {abs:?}}}}}\nrunner: {{meta: {{model: m, kind: scripted, script: {:?}}}, worker: {{type: docker_codex_cli}}}}\n",
            format!("{abs}/script.yaml")
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(task.repo, dir.0);
    let errors = parse_on(
        gone(),
        &[key()],
        "version: 1\ntask: {prd: {path: prd.md}}\nrunner: {meta: {kind: scripted, script: s.yaml}}\n",
    )
    .unwrap_err();
    assert_eq!(
        summary(&errors),
        [
            ("task.prd.path", Category::Environment),
            ("task.repo", Category::Environment),
            ("runner.meta.script", Category::Environment),
        ]
        .map(|(p, c)| (p.to_string(), c))
    );
    let repo = errors.iter().find(|e| e.path == "task.repo").unwrap();
    assert!(
        repo.message.contains("\".\" needs the current directory")
            && repo.message.contains("No such file or directory"),
        "{repo}"
    );
}

#[test]
fn repo_paths_that_would_break_a_mount_value_are_refused() {
    let dir = Scratch::new();
    for (yaml, path) in [
        (
            "version: 1\ntask: {repo: \"a\\nb\", prd: {text: x}}\n",
            "task.repo",
        ),
        (
            "task: {id: a, title: t, instructions: i, project: {root_dir: \"/tmp\\x1b[0m\"}}\nrunner: {meta: {model: m}, worker: {type: docker_codex_cli}}\n",
            "task.project.root_dir",
        ),
    ] {
        let e = first(parse_in(&dir.0, &[KEY], yaml).unwrap_err());
        assert_eq!(e.category, Category::Value);
        assert_error(&e, path, "control characters");
    }
    // The YAML may say ".": what counts is the directory it resolves to.
    let bad = dir.0.join("line\nbreak");
    std::fs::create_dir(&bad).unwrap();
    let e = first(parse_in(&bad, &[KEY], "version: 1\ntask: {prd: {text: x}}\n").unwrap_err());
    assert_eq!(e.category, Category::Environment);
    assert_error(&e, "task.repo", "docker cannot mount it safely");
}

/// A HOME with `.codex/auth.json` holding `content`.
fn home_with_auth(dir: &Scratch, content: &str) -> (&'static str, OsString) {
    dir.file("home/.codex/auth.json", content.as_bytes());
    ("HOME", dir.0.join("home").into_os_string())
}

#[test]
fn the_root_and_the_home_directory_are_refused_as_repositories() {
    let dir = Scratch::new();
    let home = ("HOME", dir.0.join("home").into_os_string());
    std::fs::create_dir(dir.0.join("home")).unwrap();
    for (cwd, what) in [
        (PathBuf::from("/"), "which is the filesystem root"),
        (dir.0.join("home"), "which holds your home directory"),
        (dir.0.clone(), "which holds your home directory"),
    ] {
        let e = first(
            parse_on(
                Ok(cwd),
                &[key(), home.clone()],
                "version: 1\ntask: {prd: {text: x}}\n",
            )
            .unwrap_err(),
        );
        assert_eq!(e.category, Category::Environment);
        assert_error(&e, "task.repo", what);
    }
    std::fs::create_dir(dir.0.join("project")).unwrap();
    assert!(
        parse_on(
            Ok(dir.0.join("project")),
            &[key(), home],
            "version: 1\ntask: {prd: {text: x}}\n"
        )
        .is_ok(),
        "a directory beside HOME is fine"
    );
}

#[test]
fn codex_auth_belongs_to_the_task_and_its_values_are_secrets() {
    let dir = Scratch::new();
    let home = home_with_auth(
        &dir,
        r#"{"tokens": {"access_token": "at-live-0123456789"}}"#,
    );
    let yaml = "version: 1\ntask:\n  title: uses at-live-0123456789\n  prd: {text: 'token at-live-0123456789 here'}\n";
    // The repository beside HOME, not holding it (that is refused).
    let repo = dir.0.join("repo");
    std::fs::create_dir(&repo).unwrap();
    let task = parse_on(Ok(repo), &[key(), home], yaml).unwrap();
    assert_eq!(
        task.login,
        Login::File {
            path: dir.0.join("home/.codex/auth.json"),
            secrets: vec![Secret::new("at-live-0123456789".into())],
            modes: vec![crate::agent::codex::CHATGPT],
        }
    );
    assert!(
        task.secrets()
            .iter()
            .any(|s| s.expose() == "at-live-0123456789")
    );
    assert_eq!(task.prd.text, "token *** here");
    assert_eq!(task.title, "uses ***");
    let out = resolved_yaml(&task);
    assert!(out.contains("codex_auth: file "), "{out}");
    assert!(!out.contains("at-live"), "{out}");
    // Without the file, CODEX_API_KEY; the key is a secret too.
    let task = parse_on(
        Ok(dir.0.clone()),
        &[key(), ("CODEX_API_KEY", "ck-0123456789".into())],
        "version: 1\ntask: {prd: {text: 'ck-0123456789'}}\n",
    )
    .unwrap();
    assert_eq!(
        task.login,
        Login::Key {
            var: "CODEX_API_KEY",
            value: Secret::new("ck-0123456789".into())
        }
    );
    assert_eq!(task.prd.text, "***");
    // An auth.json that cannot be read is a host problem, not a silent fallback.
    let dir = Scratch::new();
    let home = home_with_auth(&dir, "{broken");
    std::fs::create_dir(dir.0.join("repo")).unwrap();
    let e = first(
        parse_on(
            Ok(dir.0.join("repo")),
            &[key(), home],
            "version: 1\ntask: {prd: {text: x}}\n",
        )
        .unwrap_err(),
    );
    assert_eq!(e.category, Category::Environment);
    assert!(e.path.ends_with(".codex/auth.json"), "{e}");
}

#[test]
fn secrets_are_masked_before_the_preview_cut() {
    let dir = Scratch::new();
    let secret = "zq9-preview-secret";
    // The secret straddles the 200th character of the PRD, where validate's preview
    // ends: cut first and masked after, its first 5 characters would show.
    let prd = format!("{}{secret} and more", "p".repeat(195));
    let yaml = format!(
        "version: 1\ntask:\n  prd: {{text: '{prd}'}}\n  acceptance_criteria: ['no {secret} in logs']\nrunner:\n  meta: {{system_prompt: 'key {secret}'}}\n  worker: {{env: {{S: 'env:S'}}}}\n"
    );
    let task = parse_in(&dir.0, &[KEY, ("S", secret)], &yaml).unwrap();
    assert_eq!(task.prd.text, format!("{}*** and more", "p".repeat(195)));
    assert_eq!(task.acceptance_criteria, ["no *** in logs"]);
    assert_eq!(task.meta.system_prompt.as_deref(), Some("key ***"));
    let out = resolved_yaml(&task);
    assert!(!out.contains("zq9"), "{out}");
    assert!(
        out.contains(&format!("start: {}*** a\n", "p".repeat(195))),
        "{out}"
    );
}

#[test]
fn a_script_that_is_not_a_regular_file_says_what_it_is() {
    let dir = Scratch::new();
    let fifo = dir.0.join("script.fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let yaml = |script: &str| {
        format!(
            "version: 1\ntask: {{prd: {{text: x}}}}\nrunner: {{meta: {{kind: scripted, script: {script:?}}}}}\n"
        )
    };
    for (script, words) in [
        ("script.fifo", "is not a regular file"),
        (".", "is not a regular file"),
        ("missing.yaml", "not found"),
    ] {
        let errors = parse_in(&dir.0, &[], &yaml(script)).unwrap_err();
        let e = errors
            .iter()
            .find(|e| e.path == "runner.meta.script")
            .unwrap_or_else(|| panic!("{errors}"));
        assert!(e.message.contains(words), "{script}: {e}");
    }
}
