//! The runner does not depend on the pipeline: the pipeline drives the runner as a
//! child process, as any other program would, so the runner must stay usable (and
//! testable) without it. Only `lib.rs` (which declares the module), the pipeline
//! commands in `src/cli/` and `error.rs` (the one place errors become exit codes) may
//! name `pipeline`.

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
