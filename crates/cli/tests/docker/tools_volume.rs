//! Any image (SPEC §21): the real codex from agent-runner's tools volume, mounted
//! read-only at /agent-runner-tools, in an image built FROM scratch with nothing but a
//! static busybox (no codex, no git), against a fake Responses API on 127.0.0.1; the
//! git-free snapshots of the volume's helper (changed files, the no-progress stop);
//! the worker, root in its container, cannot change the agent nor move the volume
//! aside (SPEC §27); `agent_from: image`
//! and claude where they cannot work. The volume is filled once per host and digest
//! (`needs!(ToolsVolume)`), shared by every test.

use crate::support;

use std::path::Path;

use support::Scratch;
use support::docker::docker;
use support::fake_responses::{FakeResponses, Reply};
use support::prerequisite::needs;
use support::task::assert_no_container;
use support::task_yaml::TaskYaml;
use support::{Outcome, Run};

const MODEL_KEY: &str = "sk-fake-responses-tools-0123456789";
const CODEX: &str = "/agent-runner-tools/codex/package/vendor/x86_64-unknown-linux-musl/bin/codex";

/// An image FROM scratch with the test worker image's static busybox and nothing
/// else: no git, no codex, no C library (tagged by the test image's id, built once).
fn bare_image() -> String {
    static IMAGE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    IMAGE
        .get_or_init(|| {
            let base = support::docker::TEST_IMAGE;
            let id = support::docker::docker_ok(&["image", "inspect", "--format", "{{.Id}}", base]);
            let id = id.trim().trim_start_matches("sha256:");
            let tag = format!("agent-runner-test-worker:busybox-{}", &id[..12]);
            if !docker(&["image", "inspect", &tag]).0 {
                let context = Scratch::new("bare-image");
                let created = support::docker::docker_ok(&["create", base, "/bin/true"]);
                let created = created.trim();
                let into = context.join("busybox").display().to_string();
                let copied = docker(&["cp", &format!("{created}:/bin/busybox"), &into]);
                support::docker::docker_ok(&["rm", created]);
                assert!(copied.0, "docker cp of the test image's busybox: {}", copied.2);
                context.file(
                    "Dockerfile",
                    "FROM scratch\nCOPY busybox /bin/busybox\n\
                     RUN [\"/bin/busybox\", \"sh\", \"-c\", \"/bin/busybox --install -s /bin && chmod 755 /bin/busybox && mkdir -p /tmp /root /etc && chmod 1777 /tmp && echo root:x:0:0:root:/root:/bin/sh > /etc/passwd && echo root:x:0: > /etc/group\"]\n\
                     ENV PATH=/usr/local/bin:/usr/bin:/bin HOME=/root\n",
                );
                let out = Run::program(
                    "docker",
                    &["build", "-q", "-t", &tag, &context.path.display().to_string()],
                )
                .env("DOCKER_BUILDKIT", "0")
                .output();
                assert_eq!(out.code, Some(0), "docker build of {tag}: {}", out.stderr);
            }
            let (_, which, _) = docker(&[
                "run", "--rm", &tag, "sh", "-c",
                "command -v git codex; ls /lib /lib64 /usr/lib 2>/dev/null; true",
            ]);
            assert_eq!(which.trim(), "", "{tag} has no git, no codex, no libraries");
            tag
        })
        .clone()
}

fn task_id(name: &str) -> String {
    format!("tools-{name}-{}", support::short_id())
}

/// A task whose worker is the real codex pointed at `model`, in `image`, with
/// `network: host` (the fake model is on 127.0.0.1).
fn codex_task(
    id: &str,
    repo: &Path,
    script: &str,
    image: &str,
    model: &FakeResponses,
    loops: u32,
) -> TaskYaml {
    let provider = model.provider("fake", "FAKE_OPENAI_KEY", 1);
    TaskYaml::hello(id, repo)
        .scripted(script, loops)
        .image(image)
        .set("runner.worker.network", "host")
        .set("runner.worker.model", "some-model")
        .set("runner.worker.max_run_time_sec", 120)
        .set("runner.worker.idle_timeout_sec", 60)
        .set(
            "runner.worker.extra_args",
            ["-c", &provider, "-c", "model_provider=fake"],
        )
        .set("runner.worker.env.FAKE_OPENAI_KEY", MODEL_KEY)
}

fn run(dir: &Scratch, yaml: &TaskYaml) -> Outcome {
    Run::new(&["run", "--json"])
        .env("HOME", &dir.path)
        .stdin(yaml.to_string())
        .output()
}

fn note(repo: &Path, id: &str) -> String {
    std::fs::read_to_string(repo.join(format!(".agent-runner/task-{id}.md")))
        .expect("the Task Note is written")
}

/// Scripted Meta: one criterion, then `runs` worker runs each assessed as not
/// done, the last one (when `passes`) as done.
fn meta_script(dir: &Scratch, prompts: &[&str], passes: bool) -> String {
    let mut script = String::from(
        "- type: plan_task\n  acceptance_criteria:\n    - id: AC-1\n      description: hello.txt says hello\n",
    );
    for (n, prompt) in prompts.iter().enumerate() {
        let passed = if passes && n + 1 == prompts.len() {
            "AC-1"
        } else {
            ""
        };
        script.push_str(&format!(
            "- type: next_action\n  decision:\n    action: run_worker\n    reason: loop {n}\n  worker_call:\n    worker_type: codex-cli\n    mode: exec\n    prompt: {prompt:?}\n\
             - type: completion_assessment\n  summary: assessed\n  details:\n    passed_criteria: [{passed}]\n    remaining_risks: []\n"
        ));
    }
    dir.file("meta-script.yaml", script).display().to_string()
}

/// What codex's shell tool returned for the command it ran, from the model's next
/// request.
fn tool_output(model: &FakeResponses, request: usize) -> String {
    let requests = model.received();
    let outputs = requests[request].inputs("function_call_output");
    outputs[0]["output"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// `agent-runner tools image` built again under the same tag leaves no image behind:
/// each import is a new image, and the one the tag named before is removed.
#[test]
#[ignore = "needs tools-volume"]
fn a_tools_image_built_again_leaves_no_untagged_image_behind() {
    needs!(ToolsVolume);
    let tag = format!("agent-runner-test-tools-again:{}", std::process::id());
    let build = || {
        Run::new(&["tools", "image", "--without-agents", "--tag", &tag])
            .output()
            .code(0);
        let (ok, id, _) = docker(&["image", "inspect", "--format", "{{.Id}}", &tag]);
        assert!(ok, "{tag} was not built");
        id.trim().to_string()
    };
    let first = build();
    let second = build();
    assert_ne!(first, second, "each import is a new image");
    let (gone, _, stderr) = docker(&["image", "inspect", &first]);
    assert!(!gone, "the first build is still there: {stderr}");
    // Held by another tag, the image the tag named before stays.
    let held = format!("agent-runner-test-tools-held:{}", std::process::id());
    assert!(docker(&["tag", &second, &held]).0);
    let third = build();
    assert!(
        docker(&["image", "inspect", &second]).0,
        "a held image was removed"
    );
    for image in [&tag, &held] {
        docker(&["image", "rm", image]);
    }
    assert!(!docker(&["image", "inspect", &third]).0);
}

#[test]
#[ignore = "needs tools-volume"]
fn real_codex_from_the_tools_volume_completes_in_a_busybox_image_without_git() {
    needs!(ToolsVolume);
    let image = bare_image();
    let dir = Scratch::new("tools-complete");
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(repo.join("notes.txt"), "one\n").unwrap();
    let id = task_id("ok");
    let model = FakeResponses::start(vec![
        Reply::Command(
            "echo hello > hello.txt && echo two >> notes.txt && command -v git codex; echo done"
                .into(),
        ),
        Reply::Message("Created hello.txt.".into()),
    ]);
    let script = meta_script(&dir, &["Create hello.txt saying hello."], true);
    let out = run(&dir, &codex_task(&id, &repo, &script, &image, &model, 1));
    out.code(0).stdout_has("COMPLETE");
    assert_eq!(
        std::fs::read_to_string(repo.join("hello.txt")).unwrap(),
        "hello\n"
    );
    let output = tool_output(&model, 1);
    assert!(
        output.contains("exited with code 0")
            && !output.contains("/git")
            && output.contains("done"),
        "the image has neither git nor codex on PATH: {output}"
    );
    let note = note(&repo, &id);
    assert!(note.contains("(completed, ExitCode=0)"), "{note}");
    assert!(
        note.contains("- Files changed (the image has no git: agent-runner's helper compared the files before and after):"),
        "{note}"
    );
    assert!(note.contains("  - A hello.txt\n"), "{note}");
    assert!(note.contains("  - M notes.txt\n"), "{note}");
    assert!(
        note.contains("Changed files are listed by agent-runner's helper"),
        "{note}"
    );
    assert_no_container(&id);
}

#[test]
#[ignore = "needs tools-volume"]
fn loops_that_change_nothing_stop_in_an_image_without_git() {
    needs!(ToolsVolume);
    let image = bare_image();
    let dir = Scratch::new("tools-stalled");
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(repo.join("README"), "stuck\n").unwrap();
    let id = task_id("stalled");
    let model = FakeResponses::start(vec![
        Reply::Message("I looked around.".into()),
        Reply::Message("I looked around again.".into()),
        Reply::Message("And again.".into()),
    ]);
    let script = meta_script(&dir, &["Look.", "Look again.", "And again."], false);
    let yaml = codex_task(&id, &repo, &script, &image, &model, 3)
        .test("echo 1 test failed; exit 1")
        .set("runner.max_stalled_loops", 2);
    let out = run(&dir, &yaml);
    out.code(1);
    let result: serde_json::Value = serde_json::from_str(&out.stdout).expect("--json");
    assert_eq!(result["error"], "no progress in 2 loops", "{}", out.stderr);
    assert_eq!(result["loops"], 2);
    assert!(note(&repo, &id).contains("no progress in 2 loops"));
    assert_no_container(&id);
}

#[test]
#[ignore = "needs tools-volume"]
fn the_worker_as_root_cannot_overwrite_the_agent_nor_move_the_volume_aside() {
    needs!(ToolsVolume, Root);
    let image = bare_image();
    let dir = Scratch::new("tools-attack");
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let id = task_id("attack");
    let overwrite = format!(
        "echo uid=$(id -u); cp /bin/busybox {CODEX}; echo cp=$?; sh -c ': > {CODEX}'; echo truncate=$?; \
         mount -o remount,rw /agent-runner-tools; echo mount=$?; echo hello > hello.txt"
    );
    // SPEC §27: the volume is mounted directly under `/`: a mount point cannot be
    // renamed, nor can its parent, the root; unmounting needs a capability the
    // worker has not. (A look-alike could then go nowhere but over the volume.)
    let aside = "mv /agent-runner-tools /tools-aside; echo mv=$?; mv / /root-aside; echo mvroot=$?; \
                 umount -l /agent-runner-tools; echo umount=$?; ls /agent-runner-tools/ready; echo still=$?";
    let model = FakeResponses::start(vec![
        Reply::Command(overwrite),
        Reply::Message("Tried.".into()),
        Reply::Command(aside.into()),
        Reply::Message("Tried again.".into()),
        Reply::Command("cat hello.txt".into()),
        Reply::Message("Still the real one.".into()),
    ]);
    let script = meta_script(
        &dir,
        &["Overwrite codex.", "Move it aside.", "Go on."],
        true,
    );
    let out = run(&dir, &codex_task(&id, &repo, &script, &image, &model, 3));
    let output = tool_output(&model, 1);
    assert!(output.contains("uid=0"), "root in the container: {output}");
    assert!(output.contains("Read-only file system"), "{output}");
    for refused in ["cp=1", "truncate=1"] {
        assert!(output.contains(refused), "{refused}: {output}");
    }
    assert!(!output.contains("mount=0"), "no remount: {output}");
    let moved = tool_output(&model, 3);
    for refused in ["mv=1", "mvroot=1", "still=0"] {
        assert!(moved.contains(refused), "{refused}: {moved}");
    }
    assert!(!moved.contains("umount=0"), "no unmount: {moved}");
    // The third run is the volume's codex again, by the same path.
    out.code(0);
    assert_eq!(model.received().len(), 6, "{}", out.stderr);
    let (ok, version, _) = docker(&[
        "run",
        "--rm",
        "--mount",
        &format!(
            "type=volume,source={},target=/agent-runner-tools,readonly",
            tools_volume()
        ),
        &image,
        CODEX,
        "--version",
    ]);
    assert!(ok && version.starts_with("codex-cli 0.169.0"), "{version}");
    assert_no_container(&id);
}

/// The volume's name, as `tools install` says it.
fn tools_volume() -> String {
    let out = Run::new(&["tools", "install"]).output();
    out.code(0);
    out.stdout.split_whitespace().next().unwrap().to_string()
}

#[test]
#[ignore = "needs tools-volume"]
fn agent_from_image_without_an_agent_in_it_is_a_clear_error() {
    needs!(ToolsVolume);
    let image = bare_image();
    let dir = Scratch::new("tools-from-image");
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let id = task_id("from-image");
    let model = FakeResponses::start(vec![Reply::Message("never asked".into())]);
    let script = meta_script(&dir, &["Do it."], true);
    let yaml =
        codex_task(&id, &repo, &script, &image, &model, 1).set("runner.worker.agent_from", "image");
    let out = run(&dir, &yaml);
    out.code(1);
    let expected = format!(
        "docker image {image} cannot run the worker: it has no `codex` on PATH (runner.worker.agent_from: image;"
    );
    assert!(out.stderr.contains(&expected), "{}", out.stderr);
    let note = note(&repo, &id);
    assert!(note.contains("(runner.worker.agent_from: image;"), "{note}");
    assert!(model.received().is_empty());
    assert_no_container(&id);
}

#[test]
#[ignore = "needs tools-volume"]
fn claude_from_the_volume_is_refused_in_an_image_without_its_c_library() {
    needs!(ToolsVolume);
    let image = bare_image();
    let dir = Scratch::new("tools-claude");
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let id = task_id("claude");
    let script = dir.file(
        "meta-script.yaml",
        "- type: plan_task\n  acceptance_criteria:\n    - id: AC-1\n      description: x\n\
         - type: next_action\n  decision:\n    action: run_worker\n    reason: r\n  worker_call:\n    worker_type: claude-code-cli\n    mode: exec\n    prompt: p\n",
    );
    let yaml = TaskYaml::hello(&id, &repo)
        .scripted(&script, 1)
        .image(&image)
        .set("runner.worker.kind", "claude-code-cli")
        .set("runner.worker.network", "none")
        .set(
            "runner.worker.env.ANTHROPIC_API_KEY",
            "sk-ant-fake-0123456789",
        );
    let out = run(&dir, &yaml);
    out.code(1);
    let expected = format!(
        "docker image {image} cannot run the worker: it has no `claude` on PATH, and claude's binary needs a C library in the image"
    );
    assert!(out.stderr.contains(&expected), "{}", out.stderr);
    assert!(out.stderr.contains("and it has neither"), "{}", out.stderr);
    assert_no_container(&id);
}

/// `agent-runner doctor` on a task in `image` with the worker `kind`: its line
/// about the agent.
fn doctor_line(dir: &Scratch, image: &str, kind: &str) -> (Outcome, String) {
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let yaml = TaskYaml::new("", &repo, "anything")
        .remove("task.id")
        .set("runner.meta.kind", "scripted")
        .set(
            "runner.meta.script",
            dir.file("s.yaml", "[]").display().to_string(),
        )
        .image(image)
        .set("runner.worker.kind", kind)
        .set("runner.worker.network", "none");
    let out = Run::new(&["doctor"])
        .env("HOME", &dir.path)
        .env("CODEX_API_KEY", "sk-fake")
        .env("ANTHROPIC_API_KEY", "sk-ant-fake")
        .stdin(yaml.to_string())
        .output();
    let program = if kind == "claude-code-cli" {
        "claude"
    } else {
        "codex"
    };
    let line = out
        .stdout
        .lines()
        .find(|l| l.contains(&format!("{program} in the image")))
        .unwrap_or_else(|| panic!("no agent line: {}{}", out.stdout, out.stderr))
        .to_string();
    (out, line)
}

#[test]
#[ignore = "needs tools-volume"]
fn doctor_takes_the_volumes_codex_and_refuses_claude_naming_the_image() {
    needs!(ToolsVolume);
    let image = bare_image();
    let dir = Scratch::new("tools-doctor");
    let (_, codex) = doctor_line(&dir, &image, "codex-cli");
    assert!(
        codex.starts_with("ok")
            && codex.contains("from agent-runner's tools volume agent-runner-tools-"),
        "{codex}"
    );
    let (out, claude) = doctor_line(&dir, &image, "claude-code-cli");
    out.code(1);
    assert!(claude.starts_with("FAIL"), "{claude}");
    assert!(
        claude.contains(&format!(
            "refused in image {image}: claude's binary needs a C library"
        )),
        "{claude}"
    );
}
