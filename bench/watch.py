#!/usr/bin/env python3
"""Watching a run (SPEC §19, `make bench`): how long an event takes from being written
to being seen, and what the state file costs per step.

1. Event -> visible in `task logs -f`: a task whose worker runs 40 short commands
   (80 worker items, plus state, meta, run and test events); `task logs -f` follows
   it from the queue; each printed line's arrival against the event's own time
   (`at`, written as it happened). Target: within 200 ms.
2. Event -> visible in the browser: the same task's page in headless Chromium
   (chromedriver, WebDriver over HTTP): a MutationObserver stamps each line of the
   live log as it appears. Needs /usr/bin/chromium and /usr/bin/chromedriver.
3. The state file: the runner's own time per write (its debug log), and the share of
   the run's wall time all its writes took: the 3-loop task of bench.py's overhead
   figure (a worker run and a test per loop), and 20 loops without a worker run
   (the share as large as it gets).
Median and p95 of each; BENCH_ONLY=1,2,3 runs only these.
"""

import http.client as httpc
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BIN = os.environ.get("AGENT_RUNNER_BIN", os.path.join(ROOT, "target/release/agent-runner"))
IMAGE = os.environ.get("BENCH_IMAGE", "agent-runner-test-worker:latest")
ONLY = set(filter(None, os.environ.get("BENCH_ONLY", "").split(",")))
COMMANDS = 40

BUILDER = """- type: build_task_config
  task:
    id: x
    title: x
    instructions: Run the commands.
    project: {root_dir: /x}
    test: {command: "true"}
  runner:
    meta: {model: bench}
    worker: {type: docker_codex_cli}
"""


def wanted(figure):
    return not ONLY or figure in ONLY


def meta_script(directives):
    prompt = "".join(f"      {line}\n" for line in directives.splitlines())
    return ("- type: plan_task\n  acceptance_criteria:\n    - id: AC-1\n      description: done\n"
            "- type: next_action\n  decision: {action: run_worker, reason: go}\n  worker_call:\n"
            "    worker_type: codex-cli\n    mode: exec\n    prompt: |\n" + prompt +
            "- type: completion_assessment\n  summary: done\n  details: {passed_criteria: [AC-1]}\n")


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def stats(values, unit):
    return (f"median {statistics.median(values):7.1f} {unit}, p95 {percentile(values, 95):7.1f} {unit}"
            f"  (min {min(values):.1f}, max {max(values):.1f}, n={len(values)})")


def day_ms(clock):
    """`HH:MM:SS.mmm` (UTC) -> ms since midnight."""
    h, m, s = clock.split(":")
    return (int(h) * 3600 + int(m) * 60) * 1000 + round(float(s) * 1000)


def now_day_ms():
    return (time.time() * 1000) % 86_400_000


class Workspace:
    def __init__(self, work, directives):
        self.root = os.path.join(work, "project")
        os.makedirs(self.root)
        self.env = dict(os.environ, AGENT_RUNNER_HOME=os.path.join(work, "home"))
        with open(os.path.join(work, "builder.yaml"), "w") as f:
            f.write(BUILDER)
        with open(os.path.join(work, "meta.yaml"), "w") as f:
            f.write(meta_script(directives))
        defaults = os.path.join(work, "defaults.yaml")
        with open(defaults, "w") as f:
            f.write("builder: {kind: scripted, script: builder.yaml}\nrunner:\n"
                    "  meta: {kind: scripted, script: meta.yaml}\n"
                    f"  worker: {{docker_image: \"{IMAGE}\", network: none}}\n")
        self.cli("workspace", "init", self.root, "--defaults", defaults)

    def cli(self, *args, **kw):
        return subprocess.run([BIN, *args], env=self.env, check=True, capture_output=True,
                              text=True, **kw).stdout

    def task(self, name):
        self.cli("task", "new", "-w", self.root, "--id", name, "Run the commands")
        self.cli("task", "run", "-w", self.root, name)
        return name

    def orchestrate(self):
        return subprocess.Popen([BIN, "orchestrate", "-w", self.root, "--once"], env=self.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def commands():
    return "\n".join(["@run: sleep 0.05"] * COMMANDS) + "\n@say: done"


def follow_latency(rounds):
    """Event written -> its line read from `task logs -f`, in ms."""
    latencies = []
    for n in range(rounds):
        work = tempfile.mkdtemp(prefix="agent-runner-bench-watch-")
        try:
            ws = Workspace(work, commands())
            name = ws.task(f"follow-{n}")
            logs = subprocess.Popen([BIN, "task", "logs", "-w", ws.root, "-f", name], env=ws.env,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                    bufsize=1)
            time.sleep(0.3)
            orch = ws.orchestrate()
            for line in logs.stdout:
                seen = now_day_ms()
                m = re.match(r"(\d\d:\d\d:\d\d\.\d\d\d) ", line)
                if m:
                    latencies.append((seen - day_ms(m.group(1))) % 86_400_000)
            logs.wait()
            orch.wait()
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return latencies


def http(addr, method, path, body=None):
    """One JSON request (the stdlib client: it reads by Content-Length or chunks)."""
    host, port = addr.rsplit(":", 1)
    conn = httpc.HTTPConnection(host, int(port), timeout=120)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
        return json.loads(conn.getresponse().read() or b"{}")
    finally:
        conn.close()


def browser_latency(rounds):
    """Event written -> its line shown on the task page, in ms."""
    if not (os.path.exists("/usr/bin/chromium") and os.path.exists("/usr/bin/chromedriver")):
        return None
    latencies = []
    driver = subprocess.Popen(["/usr/bin/chromedriver", "--port=0", "--log-level=WARNING"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        port = None
        for line in driver.stdout:
            m = re.search(r"started successfully on port (\d+)", line)
            if m:
                port = m.group(1)
                break
        wd = f"127.0.0.1:{port}"
        profile = tempfile.mkdtemp(prefix="agent-runner-bench-chromium-")
        # As crates/cli/tests/support/webdriver.rs starts it.
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
            "binary": "/usr/bin/chromium",
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--disable-background-networking", "--disable-component-update",
                     "--disable-sync", "--no-first-run", "--disable-quic",
                     f"--user-data-dir={profile}", "--window-size=1280,900", "--lang=en-US"]}}}}
        session = http(wd, "POST", "/session", caps)["value"]["sessionId"]
        def run(script):
            value = http(wd, "POST", f"/session/{session}/execute/sync",
                         {"script": script, "args": []})["value"]
            if isinstance(value, dict) and "error" in value:
                sys.exit(f"WebDriver: {value['error']}: {value.get('message', '')[:300]}")
            return value
        for n in range(rounds):
            work = tempfile.mkdtemp(prefix="agent-runner-bench-watch-")
            try:
                ws = Workspace(work, commands())
                name = ws.task(f"page-{n}")
                serve = subprocess.Popen([BIN, "serve", "-w", ws.root, "--addr", "127.0.0.1:0"],
                                         env=ws.env, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, text=True)
                url = serve.stdout.readline().strip()
                http(wd, "POST", f"/session/{session}/url", {"url": f"{url}tasks/{name}"})
                # Kept in sessionStorage: the page reloads to the note when the
                # attempt ends.
                run("window.seen = []; sessionStorage.removeItem('seen');"
                    " const pre = document.getElementById('events');"
                    "new MutationObserver(() => { const now = Date.now() % 86400000;"
                    " const lines = pre.textContent.split('\\n').filter((l) => l);"
                    " for (let i = window.seen.length; i < lines.length; i++)"
                    " window.seen.push([lines[i].slice(0, 12), now]);"
                    " sessionStorage.setItem('seen', JSON.stringify(window.seen)); })"
                    ".observe(pre, {childList: true, characterData: true, subtree: true});")
                orch = ws.orchestrate()
                orch.wait()
                time.sleep(0.5)
                for clock, shown in run("return JSON.parse(sessionStorage.getItem('seen') || '[]');"):
                    if re.match(r"\d\d:\d\d:\d\d\.\d\d\d", clock):
                        latencies.append((shown - day_ms(clock)) % 86_400_000)
                serve.terminate()
                serve.wait()
            finally:
                shutil.rmtree(work, ignore_errors=True)
        http(wd, "DELETE", f"/session/{session}")
        shutil.rmtree(profile, ignore_errors=True)
    finally:
        driver.terminate()
        driver.wait()
    return latencies


def state_writes(rounds, loops, worker):
    """The runner's own time per state file write, in µs (its debug log), and the
    share of the run's wall time all of them took, in %: a task of `loops` loops,
    each a worker run (`worker`) or Meta's claim of completion, then a test."""
    times, shares = [], []
    for n in range(rounds):
        work = tempfile.mkdtemp(prefix="agent-runner-bench-state-")
        try:
            repo = os.path.join(work, "repo")
            os.makedirs(repo)
            replies = ["- type: plan_task\n  acceptance_criteria: [{id: AC-1, description: x}]\n"]
            for i in range(loops):
                if worker:
                    replies.append("- type: next_action\n  decision: {action: run_worker, reason: x}\n"
                                   "  worker_call:\n    worker_type: codex-cli\n    mode: exec\n"
                                   f"    prompt: \"@run: echo {i} > f{i}.txt\\n@say: wrote f{i}.txt\"\n")
                else:
                    replies.append("- type: next_action\n  decision: {action: mark_complete, reason: x}\n")
                passed = "[AC-1]" if i == loops - 1 else "[]"
                replies.append(f"- type: completion_assessment\n  summary: loop {i}\n"
                               f"  details: {{passed_criteria: {passed}}}\n")
            with open(os.path.join(work, "meta.yaml"), "w") as f:
                f.write("".join(replies))
            task = (f"version: 1\ntask:\n  id: state-{n}\n  repo: {repo}\n  prd:\n    text: x\n"
                    f"  test:\n    command: \"true\"\n"
                    f"runner:\n  meta:\n    kind: scripted\n    script: {work}/meta.yaml\n"
                    f"    max_loops: {loops}\n  worker:\n    docker_image: {IMAGE}\n    network: none\n")
            start = time.time()
            out = subprocess.run([BIN, "run"], input=task, text=True, capture_output=True,
                                 env=dict(os.environ, RUST_LOG="agent_runner=debug"))
            wall_us = (time.time() - start) * 1e6
            if out.returncode != 0:
                sys.exit(f"agent-runner failed ({out.returncode}):\n{out.stderr[-3000:]}")
            these = [int(t) for t in re.findall(r"state written in (\d+) µs", out.stderr)]
            times += these
            shares.append(100 * sum(these) / wall_us)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return times, shares


def main():
    rounds = int(os.environ.get("BENCH_RUNS", "5"))
    rows = []
    if wanted("1"):
        rows.append(("event -> line of `task logs -f`", stats(follow_latency(rounds), "ms")))
    if wanted("2"):
        shown = browser_latency(rounds)
        rows.append(("event -> line on the task page (Chromium)",
                     "skipped: no chromium/chromedriver" if shown is None else stats(shown, "ms")))
    if wanted("3"):
        times, shares = state_writes(rounds, 3, True)
        rows.append(("state file written, per step (3 loops with worker runs)", stats(times, "µs")))
        rows.append(("  all its writes, share of the run's wall time", stats(shares, "%")))
        times, shares = state_writes(rounds, 20, False)
        rows.append(("state file written, per step (20 loops, no worker run)", stats(times, "µs")))
        rows.append(("  all its writes, share of the run's wall time", stats(shares, "%")))
    width = max(len(label) for label, _ in rows)
    print(f"\nagent-runner watch benchmarks ({os.cpu_count()} cores, load {os.getloadavg()[0]:.1f})")
    for label, value in rows:
        print(f"  {label:<{width}}  {value}")


if __name__ == "__main__":
    sys.exit(main())
