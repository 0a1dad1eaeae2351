//! Build output stays out of branches (SPEC §24): two pipeline attempts in a
//! repository without a `.gitignore` both write a `__pycache__/*.pyc` (and a
//! `node_modules/`), and their branches merge without a conflict; the note lists
//! what was left out; `runner.worker.keep_untracked` keeps it.

use crate::support;

use support::docker::TEST_IMAGE;
use support::pipeline::{BUILDER_REPLY, Pipeline, git, meta_script, read, task_id, try_git};

/// Each attempt writes its own file and the same cache files with its own content.
const WORK: &str = "@run: u=$(cat /proc/sys/kernel/random/uuid); echo $u > work-${u%%-*}.txt; mkdir -p __pycache__ lib/__pycache__ node_modules/left; echo $u > __pycache__/mod.cpython-311.pyc; echo $u > lib/__pycache__/util.cpython-311.pyc; echo $u > node_modules/left/index.js\n@say: wrote a work file and ran the tests";

fn files_of(p: &Pipeline, branch: &str) -> Vec<String> {
    git(&p.root, &["ls-tree", "-r", "--name-only", branch])
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn two_branches_that_both_wrote_pyc_files_merge_without_a_conflict() {
    let p = Pipeline::new("build-output", true);
    p.init(BUILDER_REPLY, &meta_script(WORK), "");
    let ids: Vec<String> = (1..=2).map(|n| task_id(&format!("pyc{n}"))).collect();
    for id in &ids {
        p.new_task(id, "Do the work and run the tests");
    }
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let jobs = p.run_tasks(&refs);
    let out = p.orchestrate_once(&["--jobs", "2"]).output();
    out.code(0)
        .stderr_has("3 untracked build cache file(s) left out of the branch");
    for (id, job) in ids.iter().zip(&jobs) {
        let branch = format!("agent-runner/{id}");
        let files = files_of(&p, &branch);
        assert!(
            files.iter().any(|f| f.starts_with("work-")),
            "the work is in the branch: {files:?}"
        );
        assert!(
            !files
                .iter()
                .any(|f| f.contains("__pycache__") || f.starts_with("node_modules")),
            "{files:?}"
        );
        let note = read(std::path::Path::new(
            p.result(job)["note_path"].as_str().unwrap(),
        ));
        assert!(note.contains("## Left out of the branch"), "{note}");
        for path in [
            "__pycache__/mod.cpython-311.pyc",
            "lib/__pycache__/util.cpython-311.pyc",
            "node_modules/left/index.js",
        ] {
            assert!(note.contains(&format!("- `{path}`")), "{path}: {note}");
        }
    }
    for id in &ids {
        let (merged, out) = try_git(
            &p.root,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@localhost",
                "merge",
                "--no-edit",
                &format!("agent-runner/{id}"),
            ],
        );
        assert!(merged, "merging {id} conflicted: {out}");
    }
}

#[test]
fn keep_untracked_keeps_build_caches_in_the_branch() {
    let p = Pipeline::new("build-output-kept", true);
    p.scratch.file("builder.yaml", BUILDER_REPLY);
    p.scratch.file("meta.yaml", meta_script(WORK));
    p.init_with(
        "defaults.yaml",
        &format!(
            "require_test: false\nbuilder: {{kind: scripted, script: builder.yaml}}\nrunner:\n  meta: {{kind: scripted, script: meta.yaml}}\n  worker: {{docker_image: \"{TEST_IMAGE}\", network: none, keep_untracked: true}}\n"
        ),
    );
    let id = task_id("kept");
    p.new_task(&id, "Do the work and run the tests");
    let job = p.run_tasks(&[&id]).remove(0);
    // With --jobs above 1 each attempt runs in a clone and comes back as a branch.
    let out = p.orchestrate_once(&["--jobs", "2"]).output();
    out.code(0);
    assert!(
        !out.stderr.contains("left out of the branch"),
        "{}",
        out.stderr
    );
    let files = files_of(&p, &format!("agent-runner/{id}"));
    for path in [
        "__pycache__/mod.cpython-311.pyc",
        "node_modules/left/index.js",
    ] {
        assert!(files.iter().any(|f| f == path), "{path}: {files:?}");
    }
    let note = read(std::path::Path::new(
        p.result(&job)["note_path"].as_str().unwrap(),
    ));
    assert!(!note.contains("Left out of the branch"), "{note}");
}
