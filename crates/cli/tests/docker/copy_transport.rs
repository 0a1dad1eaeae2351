//! The copy transport (SPEC §22) on emulated remote hosts (`support::remote_hosts`)
//! and locally: the repository copied into a volume of the sandbox's host, nothing
//! of this machine mounted, the work back only as the branch `agent-runner/<id>`
//! through the bundler and the landing's checks, the working tree untouched and
//! nothing left on the host.

use crate::support;

use std::path::Path;
use std::time::Duration;

use support::fake_openai::FakeOpenAi;
use support::remote_hosts::{Has, OwnHost, RemoteHost, hosts};
use support::task::*;

/// `git <args>` in `repo`: its stdout, trimmed.
fn git(repo: &Path, args: &[&str]) -> String {
    let out = support::Run::program("git", args).cwd(repo).output();
    assert_eq!(out.code, Some(0), "git {args:?}: {}", out.stderr);
    out.stdout.trim().to_string()
}

/// A repository whose out.txt says `wrong` (committed), with a file the user has
/// not committed.
fn repository(dir: &Path) {
    support::git_repo(dir, "out.txt", "wrong\n");
    std::fs::write(dir.join("draft.txt"), "the user's draft\n").unwrap();
}

/// What the working tree and HEAD are, to compare before and after.
fn tree_state(repo: &Path) -> (String, String, String, String) {
    (
        git(repo, &["rev-parse", "HEAD"]),
        git(
            repo,
            &[
                "status",
                "--porcelain",
                "--",
                ".",
                ":(exclude).agent-runner",
            ],
        ),
        std::fs::read_to_string(repo.join("out.txt")).unwrap(),
        std::fs::read_to_string(repo.join("draft.txt")).unwrap(),
    )
}

/// Containers and volumes of task `id` on the daemon `global` names.
fn leftovers(global: &[&str], id: &str) -> (Vec<String>, Vec<String>) {
    let containers = support::docker::containers_labelled_on(global, "agent-runner.task", id);
    let mut args = global.to_vec();
    let filter = format!("label=agent-runner.task={id}");
    args.extend(["volume", "ls", "-q", "--filter", &filter]);
    let volumes = support::docker::docker_ok(&args)
        .lines()
        .map(str::to_string)
        .collect();
    (containers, volumes)
}

/// The worker commits out.txt saying ok; Meta plans, runs it and assesses.
fn committing_worker() -> FakeOpenAi {
    FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker(
            "@run: sleep 3; echo ok > out.txt; git -c user.name=w -c user.email=w@w commit -qam 'worker: ok'\n@say: done",
        ),
        assess(&["AC-1"], "out.txt says ok"),
    ])
}

/// Runs a committing task with `transport` on `host` (None: the local daemon) and
/// checks the branch, the untouched working tree and that nothing is left.
fn completes_with_a_branch(host: Option<&RemoteHost>, settings: &[(&str, &str)]) {
    let dir = support::Scratch::new("copy-transport");
    repository(&dir.path);
    let before = tree_state(&dir.path);
    let id = task_id("copy");
    let server = committing_worker();
    let mut yaml = v1_task(&id, &dir.path, &server).test("grep -qx ok out.txt");
    for (key, value) in settings {
        yaml = yaml.set(key, value);
    }
    let mut run = runner(yaml);
    let global: Vec<&str> = match host {
        Some(host) => {
            run = run.env("DOCKER_HOST", &host.url);
            vec!["-H", &host.url]
        }
        None => vec![],
    };
    let mut child = run.start();
    // While it runs: its sandbox (not the copy's carrier) mounts nothing of this
    // machine.
    let mut mounts = String::new();
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(170) {
        let (running, _) = leftovers(&global, &id);
        if let Some(name) = running
            .iter()
            .find(|n| !n.starts_with("agent-runner-copy-"))
        {
            let mut args = global.clone();
            let format = "{{range .Mounts}}{{.Type}}:{{.Destination}} {{end}}";
            args.extend(["inspect", "--format", format, name]);
            let (ok, out, _) = support::docker::docker(&args);
            if ok && out.contains("/workspace/project") {
                mounts = out;
                break;
            }
        }
        if child.child().try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !mounts.contains("bind"),
        "a bind mount in a copy sandbox: {mounts}"
    );
    assert!(mounts.contains("volume:/workspace/project"), "{mounts}");
    let out = child.finish();
    let branch = format!("agent-runner/{id}");
    out.code(0)
        .stdout_has(&format!("COMPLETE: task {id}"))
        .stdout_has(&format!("the work is on the branch {branch}"));
    // The worker's commit, and the user's draft committed after it by the bundler.
    assert_eq!(
        git(&dir.path, &["show", &format!("{branch}:out.txt")]),
        "ok"
    );
    let log = git(
        &dir.path,
        &["log", "--format=%s", &format!("{}..{branch}", before.0)],
    );
    assert!(log.contains("worker: ok"), "{log}");
    assert_eq!(
        git(&dir.path, &["show", &format!("{branch}:draft.txt")]),
        "the user's draft"
    );
    git(&dir.path, &["fsck", "--strict", "--no-dangling"]);
    assert_eq!(
        tree_state(&dir.path),
        before,
        "the working tree was touched"
    );
    assert!(note(&dir.path, &id).contains(&branch));
    assert_eq!(leftovers(&global, &id), (vec![], vec![]));
}

#[test]
fn a_remote_task_leaves_its_branch_and_nothing_on_the_host() {
    completes_with_a_branch(Some(&hosts()[2 % hosts().len()]), &[]);
}

#[test]
fn copy_asked_for_locally_works_the_same() {
    completes_with_a_branch(None, &[("runner.sandbox.transport", "copy")]);
}

/// A task in `agent-runner-test-worker:nogit` (no git in the image) over the copy
/// transport on `host` (None: the local daemon): the bring-back commits the
/// worker's tree on this machine, so the branch comes back with the work, the
/// user's draft, an executable bit and a link as a link; what the repository's
/// .gitignore ignores and a new build cache stay out; nothing is left there.
fn an_image_without_git_brings_its_work_back(host: Option<&RemoteHost>) {
    let image = "agent-runner-test-worker:nogit";
    let global: Vec<&str> = match host {
        Some(host) => {
            let load = format!("docker save {image} | docker -H {} load -q", host.url);
            let out = support::Run::program("sh", &["-c", &load]).output();
            assert_eq!(out.code, Some(0), "{load}: {}", out.stderr);
            vec!["-H", &host.url]
        }
        None => vec![],
    };
    let dir = support::Scratch::new("copy-nogit");
    repository(&dir.path);
    std::fs::write(dir.join(".gitignore"), "*.log\n").unwrap();
    git(&dir.path, &["add", ".gitignore"]);
    git(
        &dir.path,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "ignore logs",
        ],
    );
    let before = tree_state(&dir.path);
    let id = task_id("nogit");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker(
            "@run: echo ok > out.txt; echo noise > run.log; mkdir -p __pycache__ && echo c > __pycache__/m.pyc; printf '#!/bin/sh\\n' > tool.sh; chmod 755 tool.sh; ln -s /etc/passwd passwd\n@say: done",
        ),
        assess(&["AC-1"], "out.txt says ok"),
    ]);
    let mut run = runner(
        v1_task(&id, &dir.path, &server)
            .image(image)
            .set("runner.sandbox.transport", "copy")
            .test("grep -qx ok out.txt"),
    );
    if let Some(host) = host {
        run = run.env("DOCKER_HOST", &host.url);
    }
    let out = run.output();
    let branch = format!("agent-runner/{id}");
    out.code(0)
        .stdout_has(&format!("COMPLETE: task {id}"))
        .stdout_has(&format!("the work is on the branch {branch}"));
    assert_eq!(
        git(&dir.path, &["show", &format!("{branch}:out.txt")]),
        "ok"
    );
    assert_eq!(
        git(&dir.path, &["show", &format!("{branch}:draft.txt")]),
        "the user's draft"
    );
    let files = git(&dir.path, &["ls-tree", "-r", &branch]);
    assert!(
        files.contains("100755 blob") && files.contains("\ttool.sh"),
        "{files}"
    );
    assert!(
        files.contains("120000 blob") && files.contains("\tpasswd"),
        "{files}"
    );
    assert!(
        !files.contains("run.log") && !files.contains("__pycache__"),
        "{files}"
    );
    assert_eq!(
        git(&dir.path, &["log", "--format=%s", "-1", &branch]),
        format!("agent-runner: task {id}")
    );
    assert_eq!(
        git(&dir.path, &["rev-parse", &format!("{branch}^")]),
        before.0
    );
    git(&dir.path, &["fsck", "--strict", "--no-dangling"]);
    assert_eq!(
        tree_state(&dir.path),
        before,
        "the working tree was touched"
    );
    assert_eq!(leftovers(&global, &id), (vec![], vec![]));
}

#[test]
fn a_remote_task_in_an_image_without_git_brings_its_branch_back() {
    an_image_without_git_brings_its_work_back(Some(&hosts()[1 % hosts().len()]));
}

#[test]
fn a_local_copy_task_in_an_image_without_git_brings_its_branch_back() {
    an_image_without_git_brings_its_work_back(None);
}

#[test]
fn bind_on_a_remote_daemon_is_still_refused() {
    let host = &hosts()[2 % hosts().len()];
    let dir = support::Scratch::new("copy-bind");
    repository(&dir.path);
    let id = task_id("bind");
    let server = FakeOpenAi::start(vec![plan(&["AC-1"]), run_worker("@say: done")]);
    let out = runner(v1_task(&id, &dir.path, &server).set("runner.sandbox.transport", "bind"))
        .env("DOCKER_HOST", &host.url)
        .output();
    assert_ne!(out.code, Some(0), "{}", out.stderr);
    out.stderr_has("refusing to bind-mount the repository");
    assert_eq!(leftovers(&["-H", &host.url], &id), (vec![], vec![]));
}

/// Egress under the copy transport goes over the lifeline, which mounts nothing of
/// this machine either (no proxy socket, no helper directory).
#[test]
fn a_remote_task_with_egress_goes_over_the_lifeline_and_mounts_nothing() {
    completes_with_a_branch(
        Some(&hosts()[2 % hosts().len()]),
        &[("runner.worker.network", "allowlist")],
    );
}

/// Without the tools volume on the host there is no lifeline: egress by allow list
/// and the agent's login file, which the socket carrier would mount from this
/// machine, are refused naming the copy transport, before anything starts there.
#[test]
fn without_the_tools_volume_allowlist_and_a_login_file_are_refused_naming_the_transport() {
    let own = OwnHost::start(Has::Image);
    let host = &own.0;
    let volume = agent_runner_sandbox::backend::tools::volume_name();
    for case in ["allowlist", "login file"] {
        let dir = support::Scratch::new("copy-no-tools");
        repository(&dir.path);
        let elsewhere = support::Scratch::new("copy-no-tools-home");
        let home = elsewhere.join("home");
        std::fs::create_dir_all(home.join(".codex")).unwrap();
        let id = task_id("no-tools");
        let server = FakeOpenAi::start(vec![plan(&["AC-1"]), run_worker("@say: done")]);
        let mut yaml = v1_task(&id, &dir.path, &server);
        if case == "allowlist" {
            yaml = yaml.set("runner.worker.network", "allowlist");
        } else {
            let auth = r#"{"tokens": {"access_token": "chatgpt-login-0123456789"}}"#;
            std::fs::write(home.join(".codex/auth.json"), auth).unwrap();
        }
        let out = runner(yaml)
            .env("DOCKER_HOST", &host.url)
            .env("HOME", &home)
            // The volume's fill on that host fails at once: no registry answers.
            .env("NPM_CONFIG_REGISTRY", "http://127.0.0.1:9/")
            .output();
        assert_ne!(out.code, Some(0), "{case}: {}", out.stderr);
        let said = format!("{}{}", out.stdout, out.stderr);
        assert!(
            said.contains("the copy transport (runner.sandbox.transport: copy"),
            "{case}: {said}"
        );
        let why = match case {
            "allowlist" => "runner.worker.network: allowlist needs the lifeline",
            _ => "the agent's login file",
        };
        assert!(said.contains(why), "{case}: {said}");
        assert!(!said.contains("chatgpt-login-0123456789"), "{said}");
        assert_eq!(leftovers(&["-H", &host.url], &id), (vec![], vec![]));
        let (there, _, _) = host.docker(&["volume", "inspect", &volume]);
        assert!(!there, "{case}: no tools volume was made on the host");
    }
}

#[test]
fn a_transport_of_another_name_is_an_input_error() {
    let dir = support::Scratch::new("copy-typo");
    repository(&dir.path);
    let server = FakeOpenAi::start(vec![]);
    let out = runner(
        v1_task(&task_id("typo"), &dir.path, &server).set("runner.sandbox.transport", "rsync"),
    )
    .output();
    assert_ne!(out.code, Some(0));
    out.stderr_has("runner.sandbox.transport");
}

#[test]
fn the_sweep_removes_the_volumes_of_dead_owners_only() {
    use agent_runner_core::owner::Owner;
    use agent_runner_sandbox::backend::sweep::owner_labels;
    use agent_runner_sandbox::backend::sweep_orphans;
    let pid_max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let me = Owner::this_process();
    let dead = Owner {
        pid: pid_max + 1,
        ..me.clone()
    };
    let id = task_id("sweep-volume");
    let volume = |owner: &Owner, suffix: &str| {
        let name = format!("agent-runner-copy-{id}-{suffix}");
        let mut args = vec!["volume".to_string(), "create".into()];
        args.extend(["--label".into(), format!("agent-runner.task={id}")]);
        for (label, value) in owner_labels(owner) {
            args.extend(["--label".into(), format!("{label}={value}")]);
        }
        args.push(name.clone());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        support::docker::docker_ok(&args);
        name
    };
    let orphan = volume(&dead, "dead");
    let live = volume(&me, "live");
    let removed = sweep_orphans();
    // Every agent-runner's start-up sweeps this daemon: another test's may have
    // removed the orphan first. Gone it must be, and the live owner's kept.
    let (_, left) = leftovers(&[], &id);
    assert_eq!(
        left,
        std::slice::from_ref(&live),
        "{orphan} is left; swept: {removed:?}"
    );
    assert!(!removed.contains(&format!("volume {live}")), "{removed:?}");
    support::docker::docker_ok(&["volume", "rm", &live]);
}

#[test]
fn refs_and_config_a_worker_plants_in_the_copy_stay_there() {
    let dir = support::Scratch::new("copy-planted");
    repository(&dir.path);
    let refs_before = git(&dir.path, &["for-each-ref", "--format=%(refname)"]);
    let config_before = std::fs::read_to_string(dir.join(".git/config")).unwrap();
    let id = task_id("planted");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker(
            "@run: echo ok > out.txt; git -c user.name=w -c user.email=w@w commit -qam ok; git branch evil; git tag -f planted; git config core.fsmonitor 'touch /tmp/pwned'; ln -s /etc/passwd passwd-link\n@say: done",
        ),
        assess(&["AC-1"], "out.txt says ok"),
    ]);
    let out = runner(
        v1_task(&id, &dir.path, &server)
            .test("grep -qx ok out.txt")
            .set("runner.sandbox.transport", "copy"),
    )
    .output();
    let branch = format!("agent-runner/{id}");
    out.code(0)
        .stdout_has(&format!("the work is on the branch {branch}"));
    // Only the branch came back: no other ref, no tag, no config.
    let refs = git(&dir.path, &["for-each-ref", "--format=%(refname)"]);
    let mut wanted = vec![refs_before, format!("refs/heads/{branch}")];
    wanted.sort();
    assert_eq!(refs.lines().collect::<Vec<_>>(), wanted);
    assert_eq!(
        std::fs::read_to_string(dir.join(".git/config")).unwrap(),
        config_before
    );
    // A link is a link in the branch, never followed on the way back.
    let mode = git(&dir.path, &["ls-tree", &branch, "passwd-link"]);
    assert!(mode.starts_with("120000 "), "{mode}");
    assert_eq!(
        git(
            &dir.path,
            &["cat-file", "-p", &format!("{branch}:passwd-link")]
        ),
        "/etc/passwd"
    );
    assert!(
        !dir.join("passwd-link").exists(),
        "the working tree was touched"
    );
    assert_eq!(leftovers(&[], &id), (vec![], vec![]));
}

/// The copy in is one tar stream of the working tree: a link to a host file stays a
/// link (its target never read), a FIFO is left out (never opened, nothing blocks),
/// long names, empty directories and modes arrive as they are, the volume's root
/// with the repository's own mode.
#[test]
fn the_copy_in_reads_nothing_outside_the_repository() {
    let dir = support::Scratch::new("copy-tar");
    let outside = support::Scratch::new("copy-tar-outside");
    repository(&dir.path);
    let secret = outside.join("secret");
    std::fs::write(&secret, "host secret\n").unwrap();
    std::os::unix::fs::symlink(&secret, dir.join("leak")).unwrap();
    std::os::unix::fs::symlink(&outside.path, dir.join("leak-dir")).unwrap();
    let deep = format!("{}/{}/{}", "a".repeat(90), "b".repeat(90), "c".repeat(90));
    let long = format!("{deep}/{}", "f".repeat(120));
    std::fs::create_dir_all(dir.join(&deep)).unwrap();
    std::fs::write(dir.join(&long), "long\n").unwrap();
    std::fs::create_dir_all(dir.join("empty")).unwrap();
    let mode = |path: &Path, mode: u32| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    mode(&dir.join("empty"), 0o700);
    mode(&dir.path, 0o750);
    let made = support::Run::program("mkfifo", &[dir.join("fifo").to_str().unwrap()]).output();
    assert_eq!(made.code, Some(0), "{}", made.stderr);
    let id = task_id("copytar");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker(&format!(
            "@run: {{ readlink leak; cat leak || echo unreadable; ls leak-dir/ || echo no-dir; stat -c %a . empty; cat {long}; [ -e fifo ] && echo fifo-there || echo no-fifo; }} > seen.txt 2>&1; echo ok > out.txt\n@say: done"
        )),
        assess(&["AC-1"], "seen"),
    ]);
    let out = runner(
        v1_task(&id, &dir.path, &server)
            .test("grep -qx ok out.txt")
            .set("runner.sandbox.transport", "copy"),
    )
    .output();
    mode(&dir.path, 0o755);
    let branch = format!("agent-runner/{id}");
    out.code(0)
        .stdout_has(&format!("the work is on the branch {branch}"));
    let seen = git(&dir.path, &["show", &format!("{branch}:seen.txt")]);
    let lines: Vec<&str> = seen.lines().collect();
    assert_eq!(lines[0], secret.display().to_string(), "{seen}");
    assert!(!seen.contains("host secret"), "{seen}");
    assert!(
        seen.contains("unreadable") && seen.contains("no-dir"),
        "{seen}"
    );
    let from_stat: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.len() == 3 && l.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    assert_eq!(from_stat, ["750", "700"], "{seen}");
    assert!(seen.contains("\nlong\n"), "{seen}");
    assert!(seen.ends_with("no-fifo"), "{seen}");
    assert_eq!(leftovers(&[], &id), (vec![], vec![]));
}

/// The status lines under "Files changed" in worker run `number`'s part of a note
/// (not the diff stat's "+N −M" lines after them).
fn files_changed(note: &str, number: u32) -> Vec<String> {
    let heading = format!("#### Run {number} ");
    let Some(at) = note.find(&heading) else {
        return Vec::new();
    };
    let part = &note[at + heading.len()..];
    let part = &part[..part.find("\n#").unwrap_or(part.len())];
    part.lines()
        .skip_while(|line| !line.starts_with("- Files changed"))
        .skip(1)
        .map_while(|line| line.strip_prefix("  - "))
        .filter(|item| !item.starts_with('+'))
        .map(str::to_string)
        .collect()
}

/// With the copy, the snapshot before a worker run is taken at the end of the test
/// run before it: what the test wrote and what the run before committed are not
/// the next run's.
#[test]
fn the_snapshot_before_a_run_is_taken_after_the_test_before_it() {
    let dir = support::Scratch::new("copy-before");
    repository(&dir.path);
    let id = task_id("copy-before");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker(
            "@run: echo one > one.txt; git add one.txt; git -c user.name=w -c user.email=w@w commit -qm one\n@say: one",
        ),
        assess(&[], "two.txt is missing"),
        run_worker("@run: echo two > two.txt\n@say: two"),
        assess(&["AC-1"], "two.txt is there"),
    ]);
    let yaml = v1_task(&id, &dir.path, &server)
        .test("echo made > by-test.txt; test -f two.txt")
        .set("runner.sandbox.transport", "copy");
    let out = runner(yaml).start().finish();
    out.code(0).stdout_has(&format!("COMPLETE: task {id}"));
    let note = note(&dir.path, &id);
    // Run 1 committed one.txt (HEAD moved, the status the same); the test wrote
    // by-test.txt after it: neither is run 2's.
    assert_eq!(files_changed(&note, 1), Vec::<String>::new(), "{note}");
    assert_eq!(files_changed(&note, 2), ["?? two.txt"], "{note}");
    assert_eq!(leftovers(&[], &id), (vec![], vec![]));
}
