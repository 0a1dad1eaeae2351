//! Whole tasks on the test cluster (SPEC §25): `runner.sandbox.host: k8s://…` runs
//! the sandbox as a Pod, the repository copied in and the work read out by exec
//! (`backend::exec_copy`), the branch landed here under the landing's checks, the
//! working tree untouched, no secret in the Pod object and no Pod left.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support;
use crate::support::cluster::{kubectl, product_tools_image, runner_env};
use crate::support::fake_openai::FakeOpenAi;
use crate::support::prerequisite::needs;
use crate::support::task::*;
use crate::support::task_yaml::TaskYaml;

fn git(repo: &Path, args: &[&str]) -> String {
    let out = support::Run::program("git", args).cwd(repo).output();
    assert_eq!(out.code, Some(0), "git {args:?}: {}", out.stderr);
    out.stdout.trim().to_string()
}

/// The Pods of task `id` not yet being deleted.
fn pods_of(id: &str) -> Vec<String> {
    let selector = format!("agent-runner.task={id}");
    let (ok, out, err) = kubectl(&["get", "pods", "-l", &selector, "-o", "json"]);
    assert!(ok, "{err}");
    let list: serde_json::Value = serde_json::from_str(&out).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|pod| pod["metadata"]["deletionTimestamp"].is_null())
        .map(|pod| pod["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// The pipeline's workspace defaults: the scripted builder, Meta at `server`, the
/// test image's own agent without network (`worker` more of its settings), then
/// `more` (hosts).
fn workspace(p: &support::pipeline::Pipeline, server: &FakeOpenAi, worker: &str, more: &str) {
    p.scratch
        .file("builder.yaml", support::pipeline::BUILDER_REPLY);
    p.init_with(
        "defaults.yaml",
        &format!(
            "builder: {{kind: scripted, script: builder.yaml}}\nrequire_test: false\nrunner:\n  meta: {{base_url: \"{}\", model: test-model}}\n  worker: {{docker_image: \"{}\", network: none, agent_from: image{worker}}}\n{more}",
            server.url,
            support::docker::TEST_IMAGE
        ),
    );
}

/// A runner of `yaml` aimed at the test cluster.
fn on_cluster(yaml: TaskYaml) -> support::Run {
    let (env, target) = runner_env();
    let mut run = runner(yaml.set("runner.sandbox.host", &target));
    for (name, value) in env {
        run = run.env(&name, value);
    }
    run
}

#[test]
#[ignore = "needs the Kubernetes test cluster: make test-cluster"]
fn a_task_on_the_cluster_lands_its_branch_and_leaves_no_pod() {
    needs!(Cluster);
    let _cluster = support::cluster::shared();
    product_tools_image();
    let dir = support::Scratch::new("k8s-task");
    support::git_repo(&dir.path, "out.txt", "wrong\n");
    std::fs::write(dir.path.join("draft.txt"), "the user's draft\n").unwrap();
    let head = git(&dir.path, &["rev-parse", "HEAD"]);
    let id = task_id("k8s");
    let secret = format!("k8s-secret-{}", support::short_id());
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker(
            "@run: test \"$K8S_SECRET\" = \"$EXPECTED\" && echo ok > out.txt; git -c user.name=w -c user.email=w@w commit -qam 'worker: ok'; if touch /agent-runner-clones/work/x 2>/dev/null; then echo writable; else echo read-only; fi > bundler-view.txt; sleep 2\n@say: done",
        ),
        assess(&["AC-1"], "out.txt says ok"),
    ]);
    let yaml = v1_task(&id, &dir.path, &server)
        .test("grep -qx ok out.txt")
        .set("runner.worker.agent_from", "image")
        .set("runner.worker.env.K8S_SECRET", "env:K8S_TEST_SECRET")
        .set("runner.worker.env.EXPECTED", &secret);
    let mut child = on_cluster(yaml).env("K8S_TEST_SECRET", &secret).start();
    // While it runs: its Pod holds no secret and mounts no host path.
    let started = Instant::now();
    let mut pod_yaml = String::new();
    while started.elapsed() < Duration::from_secs(150) && pod_yaml.is_empty() {
        if let Some(pod) = pods_of(&id).first() {
            let (ok, yaml, _) = kubectl(&["get", "pod", pod, "-o", "yaml"]);
            if ok {
                pod_yaml = yaml;
            }
        }
        if child.child().try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = child.finish();
    let branch = format!("agent-runner/{id}");
    out.code(0)
        .stdout_has(&format!("COMPLETE: task {id}"))
        .stdout_has(&format!("the work is on the branch {branch}"));
    assert!(!pod_yaml.is_empty(), "no Pod of the task was seen");
    assert!(!pod_yaml.contains("hostPath"), "{pod_yaml}");
    assert!(
        !pod_yaml.contains(&secret),
        "the secret in the Pod: {pod_yaml}"
    );
    // The worker's commit, and the user's draft committed after it.
    assert_eq!(
        git(&dir.path, &["show", &format!("{branch}:out.txt")]),
        "ok"
    );
    assert_eq!(
        git(&dir.path, &["show", &format!("{branch}:draft.txt")]),
        "the user's draft"
    );
    // What the bundler reads is the same work, mounted read-only.
    assert_eq!(
        git(&dir.path, &["show", &format!("{branch}:bundler-view.txt")]),
        "read-only"
    );
    let log = git(
        &dir.path,
        &["log", "--format=%s", &format!("{head}..{branch}")],
    );
    assert!(log.contains("worker: ok"), "{log}");
    // The working tree and HEAD as they were.
    assert_eq!(git(&dir.path, &["rev-parse", "HEAD"]), head);
    assert_eq!(
        std::fs::read_to_string(dir.path.join("out.txt")).unwrap(),
        "wrong\n"
    );
    let note = note(&dir.path, &id);
    assert!(!note.contains(&secret), "{note}");
    assert!(pods_of(&id).is_empty(), "{:?}", pods_of(&id));
}

#[test]
#[ignore = "needs the Kubernetes test cluster: make test-cluster"]
fn egress_from_a_pod_goes_only_over_the_lifeline_through_the_allow_list() {
    needs!(Cluster);
    let _cluster = support::cluster::shared();
    product_tools_image();
    let allowed = support::destination::Destination::start("allowed", "127.0.0.2");
    let denied = support::destination::Destination::start("denied", "127.0.0.3");
    let (a, d) = (allowed.authority(), denied.authority());
    let dir = support::Scratch::new("k8s-egress");
    support::git_repo(&dir.path, "out.txt", "wrong\n");
    let id = task_id("k8s-egress");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker(&format!(
            "@run: wget -q -O allowed.out http://{a}/x 2> allowed.err; \
             wget -q -O denied.out http://{d}/y 2> denied.err; echo $? > denied.rc; \
             echo ok > out.txt\n@say: fetched"
        )),
        assess(&["AC-1"], "fetched"),
    ]);
    let yaml = v1_task(&id, &dir.path, &server)
        .test("grep -qx ok out.txt")
        .set("runner.worker.agent_from", "image")
        .set("runner.worker.network", "allowlist")
        .set("runner.worker.allow", [&a]);
    let out = on_cluster(yaml).output();
    let branch = format!("agent-runner/{id}");
    out.code(0).stderr_has(&format!("egress denied: {d}"));
    let show = |file: &str| git(&dir.path, &["show", &format!("{branch}:{file}")]);
    assert_eq!(show("allowed.out"), "hello from allowed");
    assert_ne!(show("denied.rc"), "0");
    assert_eq!(denied.connections(), 0, "the denied server saw nothing");
    let log = std::fs::read_to_string(
        dir.path
            .join(format!(".agent-runner/logs/{id}/egress.jsonl")),
    )
    .unwrap();
    assert!(
        log.contains("\"allowed\":true") && log.contains("\"allowed\":false"),
        "{log}"
    );
    assert!(pods_of(&id).is_empty(), "{:?}", pods_of(&id));
}

/// The phase of Pod `name` ("gone" once deleted).
fn phase(name: &str) -> String {
    let (ok, out, _) = kubectl(&["get", "pod", name, "-o", "jsonpath={.status.phase}"]);
    if ok {
        out.trim().to_string()
    } else {
        "gone".into()
    }
}

#[test]
#[ignore = "needs the Kubernetes test cluster: make test-cluster"]
fn a_sigkilled_runner_ends_its_pod_through_the_lifeline_and_the_sweep_deletes_it() {
    needs!(Cluster);
    let _cluster = support::cluster::shared();
    product_tools_image();
    let dir = support::Scratch::new("k8s-kill");
    support::git_repo(&dir.path, "out.txt", "wrong\n");
    let id = task_id("k8s-kill");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@say: working\n@run: sleep 300"),
    ]);
    let yaml = v1_task(&id, &dir.path, &server).set("runner.worker.agent_from", "image");
    let child = on_cluster(yaml).start();
    let log = dir.join(&format!(".agent-runner/logs/{id}/run-1.log"));
    wait_for(Duration::from_secs(120), || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("working"))
    });
    let pod = pods_of(&id).pop().expect("the task's Pod runs");
    assert_eq!(phase(&pod), "Running");
    send("-KILL", &child);
    child.finish();
    // No process of agent-runner's is left to delete it: the Pod ends because
    // the lifeline's pipe closed with the killed process.
    let until = Instant::now() + Duration::from_secs(60);
    while Instant::now() < until && phase(&pod) == "Running" {
        std::thread::sleep(Duration::from_millis(250));
    }
    let ended = phase(&pod);
    assert!(
        matches!(ended.as_str(), "Succeeded" | "Failed" | "gone"),
        "the Pod of a killed runner still {ended}"
    );
    // Its owner is gone: the next sweep deletes it, by its labels.
    let swept =
        support::cluster::backend().sweep(agent_runner_sandbox::backend::sweep::Rule::AtStart);
    assert!(ended == "gone" || swept.contains(&pod), "{swept:?}");
    assert!(pods_of(&id).is_empty(), "{:?}", pods_of(&id));
}

/// The pipeline (SPEC §25 "Targets"): `orchestrate --host NAME=k8s://…:SLOTS`
/// places the attempts on the cluster; each lands its branch in the workspace.
#[test]
#[ignore = "needs the Kubernetes test cluster: make test-cluster"]
fn the_orchestrator_places_attempts_on_a_cluster_named_by_host() {
    use support::pipeline::Pipeline;
    needs!(Cluster);
    let _cluster = support::cluster::shared();
    product_tools_image();
    let (env, target) = runner_env();
    let p = Pipeline::new("k8s-orchestrate", true);
    // One slot: the two attempts one after the other, so Meta's answers come in
    // their order.
    let one = || {
        [
            plan(&["AC-1"]),
            run_worker("@run: echo ok > out.txt\n@say: done"),
            assess(&["AC-1"], "out.txt says ok"),
        ]
    };
    let server = FakeOpenAi::start(one().into_iter().chain(one()).collect());
    workspace(&p, &server, "", "");
    let ids = [
        support::pipeline::task_id("k8s-a"),
        support::pipeline::task_id("k8s-b"),
    ];
    for id in &ids {
        p.new_task(id, "Make out.txt say ok");
    }
    p.run_tasks(&[&ids[0], &ids[1]]);
    let host = format!("k8s={target}:1");
    let mut run = p
        .orchestrate_once(&["--host", &host])
        .env("OPENAI_API_KEY", KEY)
        .env("AGENT_RUNNER_META_BACKOFF_MS", "10");
    for (name, value) in env {
        run = run.env(&name, value);
    }
    let out = run.output();
    out.code(0);
    for id in &ids {
        let attempt = &p.attempts(id)[0];
        assert_eq!(
            (attempt["status"].as_str(), attempt["host"].as_str()),
            (Some("succeeded"), Some("k8s")),
            "{attempt}\n{}",
            out.stderr
        );
        // Its sandbox was a Pod, the repository copied in by exec.
        let log = support::pipeline::read(
            &std::path::PathBuf::from(attempt["log_dir"].as_str().unwrap())
                .join("runner.stderr.log"),
        );
        assert!(log.contains("repository copied into the sandbox"), "{log}");
        assert!(pods_of(id).is_empty(), "{:?}", pods_of(id));
        assert_no_container(id);
    }
}

/// A Pod no node can take within the schedule timeout fails the task `host busy`
/// with the scheduler's reason, the note written, the Pod deleted.
#[test]
#[ignore = "needs the Kubernetes test cluster: make test-cluster"]
fn a_pod_no_node_can_take_fails_the_task_host_busy_with_the_schedulers_reason() {
    needs!(Cluster);
    let _cluster = support::cluster::shared();
    product_tools_image();
    let dir = support::Scratch::new("k8s-busy");
    support::git_repo(&dir.path, "out.txt", "wrong\n");
    let id = task_id("k8s-busy");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@run: echo ok > out.txt\n@say: done"),
    ]);
    let yaml = v1_task(&id, &dir.path, &server)
        .set("runner.worker.agent_from", "image")
        .set("runner.worker.limits.memory", "1000000g");
    let out = on_cluster(yaml)
        .env(
            agent_runner_sandbox::backend::cluster::SCHEDULE_TIMEOUT_VAR,
            "3",
        )
        .output();
    assert_ne!(out.code, Some(0), "{}", out.stdout);
    let busy = "host busy: k8s://agent-runner-test/agent-runner-test: Unschedulable: ";
    out.stdout_has(busy).stdout_has("Insufficient memory");
    assert!(note(&dir.path, &id).contains(busy));
    assert!(pods_of(&id).is_empty(), "{:?}", pods_of(&id));
}

/// `hosts check` and `doctor` on a cluster (SPEC §25): the version, the rights,
/// the tools image and egress enforcement proven by a probe Pod (the test
/// cluster's Pods have loopback only: enforced).
#[test]
#[ignore = "needs the Kubernetes test cluster: make test-cluster"]
fn hosts_check_and_doctor_prove_the_clusters_rights_and_egress_enforcement() {
    needs!(Cluster);
    let _cluster = support::cluster::shared();
    product_tools_image();
    let (env, target) = runner_env();
    let dir = support::Scratch::new("k8s-check");
    let with_env = |mut run: support::Run| {
        for (name, value) in &env {
            run = run.env(name, value);
        }
        run.env("XDG_CACHE_HOME", dir.join("cache"))
    };
    let out = with_env(support::Run::new(&[
        "hosts",
        "check",
        "--host",
        &format!("k8s={target}:2"),
    ]))
    .output();
    out.code(0).stdout_has("v1.20.2, egress enforced (tried ");
    support::git_repo(&dir.path, "out.txt", "wrong\n");
    let server = FakeOpenAi::start(Vec::new());
    let yaml = v1_task(&task_id("k8s-doctor"), &dir.path, &server)
        .set("runner.worker.agent_from", "image")
        .set("runner.sandbox.host", &target);
    let out = with_env(support::Run::new(&["doctor"]).env("OPENAI_API_KEY", KEY))
        .stdin(yaml.to_string())
        .output();
    out.stdout_has("ok    the API server answers: v1.20.2")
        .stdout_has("ok    may create pods/exec")
        .stdout_has("ok    egress enforced (NetworkPolicy): enforced (tried ");
    assert!(!out.stdout.contains("docker daemon"), "{}", out.stdout);
    // The egress verdict is kept for the tasks of the next hour (beside the
    // seccomp profile's).
    let kept: Vec<String> = std::fs::read_dir(dir.join("cache/agent-runner/clusters"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("egress-"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
}

/// SPEC §25 "Faults": the cluster stops answering while the worker runs there; the
/// attempt fails `host lost: …` within seconds (not at the run's limit), nothing of
/// it lands, and its job runs again on the other host.
#[test]
#[ignore = "needs the Kubernetes test cluster: make test-cluster"]
fn a_cluster_lost_mid_run_fails_the_attempt_and_its_job_runs_again_elsewhere() {
    use support::pipeline::{Pipeline, read};
    needs!(Cluster);
    let _cluster = support::cluster::alone();
    product_tools_image();
    let (env, target) = runner_env();
    let p = Pipeline::new("k8s-lost", true);
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        run_worker("@say: working\n@sleep: 300"),
        // The job again, on the Docker host.
        plan(&["AC-1"]),
        run_worker("@run: echo ok > out.txt\n@say: done"),
        assess(&["AC-1"], "out.txt says ok"),
    ]);
    workspace(&p, &server, "", "");
    let id = support::pipeline::task_id("k8s-lost");
    p.new_task(&id, "Make out.txt say ok");
    let job = p.run_tasks(&[&id]).remove(0);
    // The cluster has more free slots: the first attempt goes there.
    let (cluster, local) = (
        format!("k8s={target}:2"),
        "local=unix:///var/run/docker.sock:1".to_string(),
    );
    let mut run = p
        .orchestrate_once(&["--host", &cluster, "--host", &local])
        .env("OPENAI_API_KEY", KEY)
        .env("AGENT_RUNNER_META_BACKOFF_MS", "10");
    for (name, value) in &env {
        run = run.env(name, value);
    }
    let child = run.start();
    let log = p
        .ws()
        .join("clones")
        .join(&job)
        .join(format!(".agent-runner/logs/{id}/run-1.log"));
    wait_for(Duration::from_secs(120), || read(&log).contains("working"));
    let paused = Instant::now();
    let unpause = support::cluster::pause_node();
    let out = child.finish();
    drop(unpause);
    // One of its attempts failed: the orchestrator says so in its exit code.
    out.code(1);
    let attempts = p.attempts(&id);
    assert_eq!(attempts.len(), 2, "{attempts:?}\n{}", out.stderr);
    let lost = &attempts[0];
    assert_eq!(lost["host"], "k8s");
    assert_eq!(lost["status"], "failed");
    let error = lost["error"].as_str().unwrap();
    assert!(error.starts_with("host lost: k8s: "), "{error}");
    assert!(
        lost["branch"].is_null(),
        "nothing of a lost attempt lands: {lost}"
    );
    assert_eq!(
        (attempts[1]["host"].as_str(), attempts[1]["status"].as_str()),
        (Some("local"), Some("succeeded")),
        "{}",
        out.stderr
    );
    // Found by the exec's watch, not at the run's limit (30 min).
    assert!(
        paused.elapsed() < Duration::from_secs(120),
        "{:?}",
        paused.elapsed()
    );
    assert_no_container(&id);
}

/// SPEC §25 "Targets": a `kubernetes:` entry of `hosts:` (its kubeconfig and
/// `schedule_timeout_sec`); a Pod no node takes in time fails the attempt `host
/// busy` and its job runs once more on another host, the busy one still healthy.
#[test]
#[ignore = "needs the Kubernetes test cluster: make test-cluster"]
fn a_busy_cluster_entry_sends_the_job_once_more_elsewhere() {
    use support::pipeline::Pipeline;
    needs!(Cluster);
    let _cluster = support::cluster::shared();
    product_tools_image();
    let (env, _) = runner_env();
    let cluster = support::cluster::cluster();
    let kubeconfig = cluster.kubeconfig.clone().unwrap();
    let p = Pipeline::new("k8s-busy-requeue", true);
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1"]),
        // The job again, on the Docker host.
        plan(&["AC-1"]),
        run_worker("@run: echo ok > out.txt\n@say: done"),
        assess(&["AC-1"], "out.txt says ok"),
    ]);
    workspace(
        &p,
        &server,
        ", limits: {memory: 1000000g}",
        &format!(
            "hosts:\n  - name: k8s\n    slots: 2\n    kubernetes: {{context: {}, namespace: {}, kubeconfig: {}, schedule_timeout_sec: 3}}\n  - {{name: local, docker: 'unix:///var/run/docker.sock', slots: 1}}\n",
            cluster.context,
            cluster.namespace,
            kubeconfig.display(),
        ),
    );
    let id = support::pipeline::task_id("k8s-busy");
    p.new_task(&id, "Make out.txt say ok");
    p.run_tasks(&[&id]);
    let mut run = p
        .orchestrate_once(&[])
        .env("OPENAI_API_KEY", KEY)
        .env("AGENT_RUNNER_META_BACKOFF_MS", "10");
    for (name, value) in &env {
        // The kubeconfig comes from the entry.
        if name != "KUBECONFIG" {
            run = run.env(name, value);
        }
    }
    let out = run.env_remove("KUBECONFIG").output();
    let attempts = p.attempts(&id);
    assert_eq!(attempts.len(), 2, "{attempts:?}\n{}", out.stderr);
    let busy = &attempts[0];
    assert_eq!(busy["host"], "k8s");
    let error = busy["error"].as_str().unwrap();
    assert!(
        error.contains("host busy: k8s://agent-runner-test/agent-runner-test: Unschedulable: ")
            && error.contains("Insufficient memory"),
        "{error}"
    );
    assert_eq!(
        (attempts[1]["host"].as_str(), attempts[1]["status"].as_str()),
        (Some("local"), Some("succeeded")),
        "{}",
        out.stderr
    );
    out.stderr_has("busy host k8s; re-queued as job");
    assert!(!out.stderr.contains("unhealthy"), "{}", out.stderr);
    assert!(pods_of(&id).is_empty(), "{:?}", pods_of(&id));
    assert_no_container(&id);
}

/// SPEC §26 on a cluster (`eval run --host NAME=k8s://…`): the case's attempt runs
/// there, and so does its grading: the graders' image is on the cluster's node
/// only, so a grading anywhere else would be an infra_error.
#[test]
#[ignore = "needs the Kubernetes test cluster: make test-cluster"]
fn an_evaluation_runs_and_grades_its_cases_on_a_cluster() {
    use support::eval_suite::EvalSuite;
    needs!(Cluster);
    let _cluster = support::cluster::shared();
    product_tools_image();
    let (env, target) = runner_env();
    let grader_image = format!("agent-runner-test-k8s-grader:{}", support::short_id());
    support::docker::docker_ok(&["tag", support::docker::TEST_IMAGE, &grader_image]);
    support::cluster::load_into_node(&grader_image);
    support::docker::docker_ok(&["rmi", &grader_image]);
    let s = EvalSuite::with_env("eval-k8s", &["fixed"], &[("GRADER_IMAGE", &grader_image)]);
    let suite = std::fs::read_to_string(&s.suite).unwrap();
    let worker = "network: none}";
    assert!(suite.contains(worker), "{suite}");
    std::fs::write(
        &s.suite,
        suite.replace(worker, "network: none, agent_from: image}"),
    )
    .unwrap();
    let case = s.case("fixed", 1);
    let mut run = s.run(&["--host", &format!("k8s={target}:1")]);
    for (name, value) in &env {
        run = run.env(name, value);
    }
    let out = run.output();
    out.code(0);
    let results = s.results();
    assert_eq!(results.len(), 1, "{results:#?}\n{}", out.stderr);
    let line = &results[0];
    assert_eq!(line["outcome"], "resolved", "{line:#}\n{}", out.stderr);
    assert_eq!(line["host"], "k8s", "{line}");
    for task in s.task_ids(&[case]) {
        assert!(pods_of(&task).is_empty(), "{:?}", pods_of(&task));
        assert!(pods_of(&format!("eval-grade-{task}")).is_empty());
        assert_no_container(&task);
    }
}

/// SPEC §25 "Resume": a cluster keeps no session of the worker's, so a task killed
/// there and resumed starts the agent afresh with its history, and its note says
/// so; the Pod of the killed run ends and is swept.
#[test]
#[ignore = "needs the Kubernetes test cluster: make test-cluster"]
fn a_resumed_task_on_a_cluster_starts_the_agent_afresh_and_the_note_says_so() {
    needs!(Cluster);
    let _cluster = support::cluster::shared();
    product_tools_image();
    let dir = support::Scratch::new("k8s-resume");
    support::git_repo(&dir.path, "out.txt", "wrong\n");
    let id = task_id("k8s-resume");
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1", "AC-2"]),
        run_worker("@run: echo one > one.txt\n@say: wrote one.txt"),
        assess(&["AC-1"], "one of two"),
        run_worker("@say: working\n@sleep: 300"),
        // After the resume.
        run_worker("@recall\n@run: echo ok > out.txt\n@say: done"),
        assess(&["AC-2"], "both done"),
    ]);
    let yaml = v1_task(&id, &dir.path, &server).set("runner.worker.agent_from", "image");
    let first = on_cluster(yaml.clone()).start();
    let log = dir.join(&format!(".agent-runner/logs/{id}/run-2.log"));
    wait_for(Duration::from_secs(120), || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("working"))
    });
    first.kill();
    let out = on_cluster(yaml).arg("--resume").output();
    out.code(0).stdout_has(&format!("COMPLETE: task {id}"));
    let run2 = std::fs::read_to_string(&log).unwrap();
    assert!(
        run2.contains("recalled 0 earlier turn(s)"),
        "a session went on: {run2}"
    );
    let note = note(&dir.path, &id);
    assert!(
        note.contains("The worker's session is not kept where this sandbox runs (a cluster whose entry names no session_storage_class, SPEC §25): worker run 2 started afresh with the history of the runs before in its prompt."),
        "{note}"
    );
    assert!(pods_of(&id).is_empty(), "{:?}", pods_of(&id));
}

/// The session claims of task `id` not yet being deleted.
fn claims_of(id: &str) -> Vec<String> {
    let selector = format!("agent-runner.task={id}");
    let (ok, out, err) = kubectl(&["get", "pvc", "-l", &selector, "-o", "json"]);
    assert!(ok, "{err}");
    let list: serde_json::Value = serde_json::from_str(&out).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|pvc| pvc["metadata"]["deletionTimestamp"].is_null())
        .map(|pvc| pvc["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// The thread ids a run log's `thread.started` events name.
fn threads(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["type"] == "thread.started")
        .map(|e| e["thread_id"].as_str().unwrap().to_string())
        .collect()
}

/// `first` once `ready` holds; else, within `limit`, it is stopped and the test
/// fails with what it printed and what the cluster says of the task's Pods and
/// claims (this test once waited in vain under a full suite's load, and said
/// nothing of why).
fn working_or_told(
    first: support::Running,
    id: &str,
    limit: Duration,
    mut ready: impl FnMut() -> bool,
) -> support::Running {
    let until = Instant::now() + limit;
    while !ready() {
        if Instant::now() > until {
            // The Pods and claims as they are, before the runner removes them.
            let selector = format!("agent-runner.task={id}");
            let (_, pods, _) = kubectl(&["describe", "pods", "-l", &selector]);
            let (_, claims, _) = kubectl(&["describe", "pvc", "-l", &selector]);
            send("-TERM", &first);
            let out = first.finish();
            panic!(
                "run 2 did not start within {} s; stderr:\n{}\npods:\n{pods}\nclaims:\n{claims}",
                limit.as_secs(),
                out.stderr
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    first
}

/// SPEC §25 "Resume": where the cluster's entry names `session_storage_class`, the
/// worker's session is a claim of that class kept across the task's Pods, so a
/// task killed there and resumed goes on with its worker's session (the same
/// thread, its earlier turn recalled, as on Docker), the note says nothing of
/// starting afresh, and the claim is deleted once the task is COMPLETE.
#[test]
#[ignore = "needs the Kubernetes test cluster: make test-cluster"]
fn a_resumed_task_on_a_cluster_with_a_session_class_goes_on_with_its_session() {
    needs!(Cluster);
    let _cluster = support::cluster::shared();
    product_tools_image();
    let class = support::cluster::session_class(1);
    let dir = support::Scratch::new("k8s-session");
    support::git_repo(&dir.path, "out.txt", "wrong\n");
    let id = task_id("k8s-session");
    // A run that fails leaves its claim for a resume: this test's go, passed or not.
    struct Claims(String);
    impl Drop for Claims {
        fn drop(&mut self) {
            let selector = format!("agent-runner.task={}", self.0);
            kubectl(&["delete", "pvc", "-l", &selector, "--wait=false"]);
        }
    }
    let _claims = Claims(id.clone());
    let server = FakeOpenAi::start(vec![
        plan(&["AC-1", "AC-2"]),
        run_worker("@run: echo one > one.txt\n@say: wrote one.txt"),
        assess(&["AC-1"], "one of two"),
        run_worker("@say: working\n@sleep: 300"),
        // After the resume.
        run_worker("@recall\n@run: echo ok > out.txt\n@say: done"),
        assess(&["AC-2"], "both done"),
    ]);
    let yaml = v1_task(&id, &dir.path, &server).set("runner.worker.agent_from", "image");
    let with_class = |yaml: TaskYaml| {
        on_cluster(yaml).env(
            agent_runner_sandbox::backend::cluster::SESSION_STORAGE_CLASS_VAR,
            &class.name,
        )
    };
    let first = with_class(yaml.clone()).start();
    let log = dir.join(&format!(".agent-runner/logs/{id}/run-2.log"));
    let first = working_or_told(first, &id, Duration::from_secs(180), || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("working"))
    });
    let thread_one = threads(
        &std::fs::read_to_string(dir.join(&format!(".agent-runner/logs/{id}/run-1.log"))).unwrap(),
    );
    assert_eq!(thread_one.len(), 1, "{thread_one:?}");
    let claims = claims_of(&id);
    assert_eq!(claims.len(), 1, "one claim for the task: {claims:?}");
    let (_, class_of, _) = kubectl(&[
        "get",
        "pvc",
        &claims[0],
        "-o",
        "jsonpath={.spec.storageClassName} {.status.phase}",
    ]);
    first.kill();
    let out = with_class(yaml).arg("--resume").output();
    out.code(0).stdout_has(&format!("COMPLETE: task {id}"));
    let run2 = std::fs::read_to_string(&log).unwrap();
    assert!(
        run2.contains("recalled 1 earlier turn(s)"),
        "the session did not go on: {run2}"
    );
    assert_eq!(threads(&run2), thread_one, "the same thread: {run2}");
    assert_eq!(class_of.trim(), format!("{} Bound", class.name));
    let note = note(&dir.path, &id);
    assert!(!note.contains("afresh"), "{note}");
    assert!(claims_of(&id).is_empty(), "{:?}", claims_of(&id));
    assert!(pods_of(&id).is_empty(), "{:?}", pods_of(&id));
}
