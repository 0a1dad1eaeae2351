#!/bin/sh
# The projects' code and checks are written as they are: nothing expands in them.
# shellcheck disable=SC2016
# Writes an offline evaluation suite into DIR: two small real projects with planted
# bugs (`calc`, a shell function library; `words`, an awk word counter), one case per
# KIND given, each case a commit of its project with the "agent's skill" in
# `.agent-fix.sh` (what the scripted Meta tells the test image's fake codex to run),
# held-out graders beside the projects (never in them), a reference solution for
# the cases that have one, and the config `scripted`.
#   make-suite.sh DIR KIND...   KIND: fixed (resolved), wrong (unresolved),
#                               slow (agent_failed: past the budget), search (looks
#                               for the grader's files everywhere in its sandbox;
#                               resolved only if it finds nothing), sleepy (fixed,
#                               then 10 s more: time to lose its host)
# Environment: SUFFIX (appended to case ids), IMAGE (worker and grading image),
# MAX_DURATION_SEC (the config's budget; the slow case sleeps past it).
set -eu

dir=$1
shift
suffix=${SUFFIX:-}
image=${IMAGE:-agent-runner-test-worker:latest}
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
  esac
  printf '# %s\n\nA small project with a planted bug.\n' "$1" > "$repo/README.md"
  git -C "$repo" add -A
  commit "$repo" commit -qm "$1: start"
}

i=0
cases=""
for kind in "$@"; do
  i=$((i + 1))
  if [ $((i % 2)) = 1 ]; then name=calc; else name=words; fi
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
  esac
  marker_head=GRADER-MARK
  case $kind in
    fixed) skill=$right ;;
    sleepy) skill="$right; sleep 10" ;;
    wrong) skill=$wrong ;;
    slow) skill="sleep 600" ;;
    search)
      # The marker is put together at run time: this file must not hold it.
      skill="m=$marker_head; m=\"\$m-$id\"; find / \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o -type f -print 2>/dev/null > /tmp/files; wc -l < /tmp/files > searched.txt; xargs grep -l -s -- \"\$m\" < /tmp/files > found.txt || true; $right"
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
  printf '# %s-%s: the held-out test\n%s\n' "$marker_head" "$id" "$check" > "$dir/graders/$id/grade.sh"
  solution=""
  if [ "$kind" = fixed ]; then
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
    grader: {files: graders/$id, command: sh grade.sh, timeout_sec: 30}$solution"
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
image: $image
cases:$cases
configs:
  - name: scripted
    runner:
      meta: {kind: scripted, script: meta.yaml}
      worker: {docker_image: "$image", network: none}
      budget: {max_duration_sec: $max_duration}
YAML
