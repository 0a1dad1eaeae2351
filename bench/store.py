"""Task files for the benchmarks: a TaskStore of `count` tasks with 5 attempts each
(the last succeeded), results included, written as the orchestrator writes them."""

import json
import os


def usage(t, a):
    """A run's `usage` (SPEC §15) as the runner reports it, varying with the attempt."""
    meta = {"input_tokens": 5000 + t % 97, "cached_input_tokens": 1000, "output_tokens": 400 + a}
    worker = {"input_tokens": 24000 + a, "cached_input_tokens": 12000, "output_tokens": 1200}
    return {"meta": dict(calls=5, unreported=0, **meta), "worker": dict(runs=2, unreported=0, **worker),
            "total_tokens": 5400 + t % 97 + a + 25200 + a, "cost_usd": 0.0412,
            "models": [dict(model="gpt-5.1", calls=5, unreported=0, cost_usd=0.0105, **meta),
                       dict(model="gpt-5.1-codex", calls=2, unreported=0, cost_usd=0.0307, **worker)]}


def write_tasks(meta, count, title, note_dir, with_usage=False, attempts=5):
    """Writes `count` task files into `<meta>/tasks/` with `attempts` attempts each;
    `title(t)` names task `t`, its note is under `note_dir`; `with_usage` adds the
    attempts' usage, budget and builder_usage, spread over 30 days. Returns the bytes
    written."""
    ws_id = os.path.basename(meta)
    tasks = os.path.join(meta, "tasks")
    for t in range(count):
        tid = f"t-{t:08x}"
        lines = [json.dumps({"type": "task", "id": tid, "workspace_id": ws_id, "title": title(t),
                             "raw_prompt": "TODO アプリを作成して " * 5,
                             "created_at": f"2026-01-01T00:{t // 60 % 60:02d}:{t % 60:02d}.000Z"},
                            ensure_ascii=False, separators=(",", ":"))]
        for a in range(attempts):
            job = f"j-{t:06d}{a:06d}"
            result = {"task_id": tid, "status": "succeeded" if a == 4 else "failed", "state": "COMPLETE",
                      "summary": "Implemented the TODO app with add, list and done; the tests pass. " * 3,
                      "validation": {"overall": "passed", "commands": [
                          {"command": "npm test", "exit_code": 0, "duration_ms": 12345}]},
                      "duration_ms": 600000, "loops": 2,
                      "note_path": f"{note_dir}/.agent-runner/task-{tid}.md"}
            day = (t * attempts + a) % 30 + 1
            line = {"type": "attempt", "attempt_id": f"a-{t:06d}{a:06d}", "job_id": job,
                    "task_id": tid, "status": result["status"],
                    "started_at": f"2026-01-{day:02d}T00:00:00.000Z",
                    "finished_at": f"2026-01-{day:02d}T00:10:00.000Z", "duration_ms": 600000,
                    "result": result, "task_config": f"{meta}/logs/{job}/task-config.yaml",
                    "log_dir": f"{meta}/logs/{job}"}
            if with_usage:
                budget = {"max_tokens": 100000, "max_cost_usd": 1.0, "max_duration_sec": None, "exhausted": None}
                result["usage"], result["budget"] = usage(t, a), budget
                line["usage"], line["budget"] = usage(t, a), budget
                line["builder_usage"] = {"model": "gpt-5.1", "calls": 1, "input_tokens": 1500,
                                         "cached_input_tokens": 0, "output_tokens": 300, "unreported": 0,
                                         "cost_usd": 0.0049}
            lines.append(json.dumps(line, separators=(",", ":")))
        with open(os.path.join(tasks, f"{tid}.jsonl"), "w") as f:
            f.write("\n".join(lines) + "\n")
    return sum(os.path.getsize(os.path.join(tasks, n)) for n in os.listdir(tasks))


def write_chain(meta, count):
    """Writes a chain of `count` tasks, each depending on the one before, and a queued
    job for each but the first, which has none: every job stays blocked."""
    ws_id = os.path.basename(meta)
    for t in range(count):
        tid = f"c-{t:04d}"
        deps = [f"c-{t - 1:04d}"] if t > 0 else []
        with open(os.path.join(meta, "tasks", f"{tid}.jsonl"), "w") as f:
            f.write(json.dumps({"type": "task", "id": tid, "workspace_id": ws_id, "title": f"Step {t}",
                                "raw_prompt": "Do the next step.", "created_at": "2026-01-01T00:00:00.000Z",
                                "depends_on": deps}) + "\n")
        if t > 0:
            with open(os.path.join(meta, "ipc", "queue", f"j-chain{t:04d}.json"), "w") as f:
                json.dump({"workspace_id": ws_id, "task_id": tid, "created_at": "2026-01-01T00:00:00.000Z"}, f)
