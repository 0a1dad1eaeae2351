#!/bin/sh
# The projects' code and checks are written as they are: nothing expands in them.
# shellcheck disable=SC2016
# Writes an offline evaluation suite into DIR: small real projects with planted
# bugs (`calc`, a shell function library; `words`, an awk word counter; `slug`, a
# Python package graded by pytest), one case per KIND given, each case a commit of
# its project with the "agent's skill" in `.agent-fix.sh` (what the scripted Meta
# tells the test image's fake codex to run), held-out graders beside the projects
# (never in them), a reference solution for the cases that have one, and the
# config `scripted`.
#   make-suite.sh DIR KIND...   KIND: fixed (resolved), wrong (unresolved),
#                               slow (agent_failed: past the budget), search (looks
#                               for the grader's files everywhere in its sandbox;
#                               resolved only if it finds nothing), sleepy (fixed,
#                               then 10 s more: time to lose its host): calc or
#                               words, in turn; pyfixed (resolved), pywrong (half
#                               fixed: one of two held-out tests fails): slug
# Environment: SUFFIX (appended to case ids), IMAGE (worker and grading image),
# GRADER_IMAGE (the suite's grading image; default IMAGE), PYTHON_IMAGE (the slug
# cases' grading image: python3 with pytest; needed by py* kinds),
# MAX_DURATION_SEC (the config's budget; the slow case sleeps past it).
set -eu

dir=$1
shift
suffix=${SUFFIX:-}
image=${IMAGE:-agent-runner-test-worker:latest}
grader_image=${GRADER_IMAGE:-$image}
max_duration=${MAX_DURATION_SEC:-60}
mkdir -p "$dir/projects" "$dir/graders" "$dir/solutions"

commit() {
  repo=$1
  shift
  git -C "$repo" -c user.name=suite -c user.email=suite@localhost -c commit.gpgSign=false "$@"
}

project() {
  repo=$dir/projects/$1
  [ -d "$repo/.git" ] && return 0
  mkdir -p "$repo"
  git -C "$repo" init -q -b main
  case $1 in
    calc) printf 'add() { echo $(($1 - $2)); }\n' > "$repo/calc.sh" ;;
    words) printf '{ n += NF - 1 }\nEND { print n }\n' > "$repo/words.awk" ;;
    slug)
      mkdir -p "$repo/slug"
      printf 'from .core import slugify\n' > "$repo/slug/__init__.py"
      cat > "$repo/slug/core.py" <<'PY'
import re


def slugify(text):
    text = text.strip().lower()
    return re.sub(r"[^a-z0-9]+", "_", text).strip("-")
PY
      ;;
  esac
  printf '# %s\n\nA small project with a planted bug.\n' "$1" > "$repo/README.md"
  git -C "$repo" add -A
  commit "$repo" commit -qm "$1: start"
}

i=0
cases=""
for kind in "$@"; do
  i=$((i + 1))
  case $kind in
    py*) name=slug ;;
    *) if [ $((i % 2)) = 1 ]; then name=calc; else name=words; fi ;;
  esac
  id="$kind-$i$suffix"
  project "$name"
  repo=$dir/projects/$name
  case $name in
    calc)
      right="sed -i 's/\$1 - \$2/\$1 + \$2/' calc.sh"
      wrong="printf 'add() { echo 5; }\\\\n' > calc.sh"
      check='. ./calc.sh && [ "$(add 2 3)" = 5 ] && [ "$(add -1 1)" = 0 ]'
      patch="--- a/calc.sh
+++ b/calc.sh
@@ -1 +1 @@
-add() { echo \$((\$1 - \$2)); }
+add() { echo \$((\$1 + \$2)); }"
      ;;
    words)
      right="sed -i 's/NF - 1/NF/' words.awk"
      wrong="sed -i 's/NF - 1/NF - 2/' words.awk"
      check='[ "$(printf "a b\nc\n" | awk -f words.awk)" = 3 ]'
      patch="--- a/words.awk
+++ b/words.awk
@@ -1,2 +1,2 @@
-{ n += NF - 1 }
+{ n += NF }
 END { print n }"
      ;;
    slug)
      right="sed -i 's/\"_\", text/\"-\", text/' slug/core.py"
      # Hyphens, but the trailing one kept: one held-out test of two fails.
      wrong="sed -i 's/\"_\", text/\"-\", text/; s/strip(\"-\")/strip()/' slug/core.py"
      patch='--- a/slug/core.py
+++ b/slug/core.py
@@ -6 +6 @@
-    return re.sub(r"[^a-z0-9]+", "_", text).strip("-")
+    return re.sub(r"[^a-z0-9]+", "-", text).strip("-")'
      ;;
  esac
  marker_head=GRADER-MARK
  case $kind in
    fixed|pyfixed) skill=$right ;;
    pywrong) skill=$wrong ;;
    sleepy) skill="$right; sleep 10" ;;
    wrong) skill=$wrong ;;
    slow) skill="sleep 600" ;;
    search)
      # The marker is put together at run time: this file must not hold it. A fixed
      # string (-F): busybox's regular expressions take many times as long over the
      # tools volume's binaries.
      skill="m=$marker_head; m=\"\$m-$id\"; find / \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o -type f -print 2>/dev/null > /tmp/files; wc -l < /tmp/files > searched.txt; xargs grep -F -l -s -- \"\$m\" < /tmp/files > found.txt || true; $right"
      check="test ! -s found.txt && test -s searched.txt && $check"
      ;;
    *) echo "make-suite.sh: unknown kind $kind" >&2; exit 2 ;;
  esac
  git -C "$repo" checkout -q -B "case-$id" main
  printf '%s\n' "$skill" > "$repo/.agent-fix.sh"
  git -C "$repo" add .agent-fix.sh
  commit "$repo" commit -qm "case $id"
  base=$(git -C "$repo" rev-parse HEAD)
  git -C "$repo" checkout -q main
  mkdir -p "$dir/graders/$id"
  command="sh grade.sh"
  own_image=""
  if [ "$name" = slug ]; then
    command="python3 -m pytest -q -p no:cacheprovider test_held.py"
    own_image=", image: \"${PYTHON_IMAGE:?PYTHON_IMAGE: an image with python3 and pytest}\""
    {
      printf '# %s-%s: the held-out test\n' "$marker_head" "$id"
      cat <<'PY'
from slug import slugify


def test_words():
    assert slugify("Hello World") == "hello-world"


def test_edges():
    assert slugify("  Hello, World! ") == "hello-world"
PY
    } > "$dir/graders/$id/test_held.py"
  else
    printf '# %s-%s: the held-out test\n%s\n' "$marker_head" "$id" "$check" > "$dir/graders/$id/grade.sh"
  fi
  solution=""
  if [ "$kind" = fixed ] || [ "$kind" = pyfixed ]; then
    printf '%s\n' "$patch" > "$dir/solutions/$id.patch"
    solution="
    solution: solutions/$id.patch"
  fi
  cases="$cases
  - id: $id
    repo: projects/$name
    base: $base
    prd: |
      Fix the bug in the $name project: its tests (which you do not see) must pass.
    grader: {files: graders/$id, command: $command, timeout_sec: 30$own_image}$solution"
done

cat > "$dir/meta.yaml" <<'YAML'
# Meta, scripted: one worker run that applies the case's .agent-fix.sh, then done.
- type: plan_task
  acceptance_criteria:
    - id: AC-1
      description: the bug is fixed
- type: next_action
  decision: {action: run_worker, reason: start}
  worker_call:
    worker_type: codex-cli
    mode: exec
    prompt: |
      Fix the bug.
      @run: sh .agent-fix.sh
      @say: fixed
- type: completion_assessment
  summary: The bug is fixed.
  details: {passed_criteria: [AC-1]}
YAML

cat > "$dir/suite.yaml" <<YAML
name: demo
image: $grader_image
cases:$cases
configs:
  - name: scripted
    runner:
      meta: {kind: scripted, script: meta.yaml}
      worker: {docker_image: "$image", network: none}
      budget: {max_duration_sec: $max_duration}
YAML
