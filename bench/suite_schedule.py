#!/usr/bin/env python3
"""The test suite's wall time as nextest would schedule it, from each test's time.

usage: suite_schedule.py JUNIT [THREADS] [NEXTEST_TOML]

Reads each test's time from a nextest junit report (`make test` keeps the main
pass's as target/nextest/default/junit-main.xml), the test groups and priorities
from .config/nextest.toml (the filters it uses: test(=name), test(/regex/),
test(substring), joined by `|`), and replays the run: the free thread takes the
waiting test of the highest priority (ties by name, as nextest orders them) whose
group has room. Prints the replayed wall time, the busy thread-seconds, and the
tests still running in the last minutes. A replay, not a measurement: the times
themselves come from a real run, and a test's time depends on what ran beside it.
"""

import sys

# This folder's copy.py would stand in for the standard library's.
sys.path.pop(0)

import heapq  # noqa: E402
import re  # noqa: E402
import xml.etree.ElementTree as ET  # noqa: E402


def matcher(expression):
    """A predicate for the filter subset the config uses."""
    parts = []
    terms = re.findall(r"test\((/(?:[^/\\]|\\.)*/|[^)]*)\)", expression)
    rest = re.sub(r"test\((/(?:[^/\\]|\\.)*/|[^)]*)\)", "", expression)
    if not terms or rest.replace("|", "").strip():
        raise SystemExit(f"suite_schedule.py: filter not understood: {expression}")
    for inner in terms:
        if inner.startswith("="):
            parts.append(lambda n, x=inner[1:]: n == x)
        elif inner.startswith("/") and inner.endswith("/"):
            parts.append(lambda n, r=re.compile(inner[1:-1]): r.search(n) is not None)
        else:
            parts.append(lambda n, x=inner: x in n)
    return lambda name: any(p(name) for p in parts)


def settings(config):
    """(test -> (group, priority)), max threads per group."""
    profile = config.get("profile", {}).get("default", {})
    overrides = [(matcher(o["filter"]), o) for o in profile.get("overrides", [])]
    groups = {name: g["max-threads"] for name, g in config.get("test-groups", {}).items()}

    def of(name):
        group, priority = None, 0
        got_group = got_priority = False
        # The first override that sets a setting wins it, as in nextest.
        for matches, o in overrides:
            if not matches(name):
                continue
            if "test-group" in o and not got_group:
                group, got_group = o["test-group"], True
            if "priority" in o and not got_priority:
                priority, got_priority = o["priority"], True
        return group, priority

    return of, groups, profile.get("test-threads", 6)


def main():
    junit = sys.argv[1]
    toml = sys.argv[3] if len(sys.argv) > 3 else ".config/nextest.toml"
    import tomllib

    with open(toml, "rb") as f:
        of, groups, threads = settings(tomllib.load(f))
    if len(sys.argv) > 2:
        threads = int(sys.argv[2])
    tests = []
    for suite in ET.parse(junit).iter("testsuite"):
        for case in suite.iter("testcase"):
            name = case.get("name")
            group, priority = of(name)
            key = (-priority, suite.get("name"), name)
            tests.append((key, name, float(case.get("time")), group))
    tests.sort()
    waiting = list(tests)
    running = []  # (end, name, group)
    in_group = {g: 0 for g in groups}
    now, done = 0.0, []
    while waiting or running:
        started = True
        while started and len(running) < threads:
            started = False
            for i, (_, name, took, group) in enumerate(waiting):
                if group is None or in_group[group] < groups[group]:
                    if group:
                        in_group[group] += 1
                    heapq.heappush(running, (now + took, name, group, now))
                    del waiting[i]
                    started = True
                    break
        end, name, group, began = heapq.heappop(running)
        now = end
        if group:
            in_group[group] -= 1
        done.append((began, end, name))
    busy = sum(t[2] for t in tests)
    print(f"{len(tests)} tests, {busy:.0f} thread-seconds, {threads} threads: "
          f"replayed wall {now:.0f} s (the busy time alone: {busy / threads:.0f} s)")
    print("still running in the last 120 s:")
    for began, end, name in sorted(done, key=lambda t: t[1]):
        if end > now - 120 and end - began > 5:
            print(f"  {began:6.0f} → {end:6.0f} s  {name}")


main()
