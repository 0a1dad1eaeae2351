# shellcheck shell=sh
# The bundler container's main process (bundler.rs beside it).
set -u
# Where the clones are, the bundles go and the bundler works: the bundler
# container's own mounts, else (in a sandbox whose worker is gone, exec_copy.rs)
# directories made fresh for this bring-back.
clones=${AR_CLONES:-/clones} out=${AR_OUT:-/out} tmp=${AR_TMP:-/tmp}
export HOME="$tmp" GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_TERMINAL_PROMPT=0
export GIT_CONFIG_COUNT=3 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0='*' GIT_CONFIG_KEY_1=core.hooksPath GIT_CONFIG_VALUE_1=/dev/null GIT_CONFIG_KEY_2=core.fsmonitor GIT_CONFIG_VALUE_2=false
fail() { echo "$*" >&2; exit 1; }
# A regular file or directory of the clone, not a link the worker put there.
plain() { if [ -L "$2" ] || ! test "$1" "$2"; then fail "${2#"$clones"/} is not a plain ${3:-file}"; fi; }
is_sha() { case $1 in *[!0-9a-f]*) return 1 ;; esac; [ ${#1} = 40 ] || [ ${#1} = 64 ]; }
# The commit the clone's HEAD names, read as data.
head_of() {
  d=$1/.git
  plain -f "$d/HEAD"
  read -r first second < "$d/HEAD" || true
  if [ "$first" != "ref:" ]; then is_sha "$first" || fail "HEAD is neither a ref nor a commit"; echo "$first"; return; fi
  case $second in refs/heads/*) ;; *) fail "HEAD names ${second:-nothing}, not a branch" ;; esac
  case /$second/ in */../*|*/./*|*//*) fail "HEAD names an odd ref" ;; esac
  sha=
  if [ -e "$d/$second" ] || [ -L "$d/$second" ]; then
    plain -f "$d/$second"
    read -r sha rest < "$d/$second" || true
  elif [ -e "$d/packed-refs" ]; then
    plain -f "$d/packed-refs"
    sha=$(awk -v ref="$second" '$2 == ref && $1 !~ /^[#^]/ { print $1; exit }' "$d/packed-refs")
  fi
  is_sha "$sha" || fail "the branch $second has no commit"
  echo "$sha"
}
# Untracked build output a repository without a .gitignore would not want in its
# branch (SPEC §24): left out unless the task keeps it (runner.worker.keep_untracked).
CACHES=":(glob)**/__pycache__/** :(glob)**/*.pyc :(glob)**/*.pyo :(glob)**/node_modules/** :(glob)**/target/** :(glob)**/.pytest_cache/** :(glob)**/.mypy_cache/** :(glob)**/.ruff_cache/** :(glob)**/.tox/** :(glob)**/.gradle/** :(glob)**/.next/** :(glob)**/.cache/**"
bundle() {
  job=$1 task=$2 branch=$3 caches=$4
  shift 4
  c=$clones/$job
  plain -d "$c" directory
  plain -d "$c/.git" directory
  plain -d "$c/.git/objects" directory
  # git would open a FIFO named like a file it reads (.gitignore, an object) and wait
  # for a writer that never comes, holding up every attempt's bring-back; and it
  # follows links in .git (to /proc/self/fd/0, to /dev/zero) and alternates.
  special=$(find "$c" \( -type p -o -type b -o -type c -o \( -type l -path "$c/.git/*" \) \) -print | head -n 1)
  [ -z "$special" ] || fail "${special#"$clones"/} is a FIFO, a device or a link in .git"
  [ ! -e "$c/.git/objects/info/alternates" ] || fail "the clone borrows objects from elsewhere (.git/objects/info/alternates)"
  head=$(head_of "$c")
  cd "$c"
  echo "$c/.git/objects" > "$GIT_DIR/objects/info/alternates"
  base_tree=$(git rev-parse -q --verify "$head^{commit}^{tree}") || fail "HEAD $head is not a commit of the clone"
  git read-tree "$head"
  # Submodules stay as HEAD has them. `git add` would run `git status` in each one
  # checked out, with that repository's own config: a filter the worker wrote there
  # would run here, in the container every later attempt's branch passes through.
  links=$tmp/agent-runner-gitlinks
  git ls-tree -r --full-tree "$head" > "$links.all"
  grep '^160000 ' "$links.all" > "$links" || true
  sed 's/^160000 /0 /' "$links" | git update-index --index-info
  git add -A -- . ':(exclude).agent-runner'
  git update-index --index-info < "$links"
  # What the worker added (new to HEAD) under a cache's name, out of the index; the
  # paths (NUL-separated) for the host to list in the note.
  : > "$out/$job.left-out"
  if [ "$caches" = drop ]; then
    # shellcheck disable=SC2086 # one pathspec per word
    git diff --cached --name-only --diff-filter=A -z "$head" -- $CACHES > "$out/$job.left-out"
    git update-index --force-remove -z --stdin < "$out/$job.left-out"
  fi
  # .agent-runner stays as the attempt's start had it, whatever the worker committed
  # there: a link or a folder of links would stop every dependent's runner.
  git rm -r -q -f --cached --ignore-unmatch -- .agent-runner > /dev/null
  git ls-tree -r --full-tree "$1" -- .agent-runner | git update-index --index-info
  tree=$(git write-tree)
  commit=$head
  if [ "$tree" != "$base_tree" ]; then
    commit=$(git commit-tree "$tree" -p "$head" -m "agent-runner: task $task")
  fi
  for have in "$@"; do
    if [ "$commit" = "$have" ]; then echo "agent-runner-bundle $job unchanged $commit"; return; fi
  done
  # The branch as a ref file: names are agent-runner/<task-id>, checked by the host.
  echo "$commit" > "$GIT_DIR/refs/heads/$branch"
  excluded=
  for have in "$@"; do excluded="$excluded ^$have"; done
  # shellcheck disable=SC2086 # one ^<commit> argument per have
  git bundle create -q "$out/$job.bundle" "refs/heads/$branch" $excluded
  echo "agent-runner-bundle $job bundled $commit"
}
# An image without git: said on stdout for the copy transport, which then
# commits the tree on its own side (tree_back.rs), and on stderr as a shell would.
if ! command -v git >/dev/null 2>&1; then
  echo agent-runner-bundler-nogit
  echo "agent-runner-bundler: git: not found" >&2
  exit 0
fi
# One private repository for every request: our config, an index of ours, the
# clone's objects borrowed per request. What a request added to it is dropped after.
g=$tmp/agent-runner-bundler
git init -q --template= "$g" || exit 1
mkdir -p "$g/.git/refs/heads/agent-runner"
export GIT_DIR="$g/.git" GIT_INDEX_FILE="$g/index" GIT_AUTHOR_NAME=agent-runner GIT_AUTHOR_EMAIL=agent-runner@localhost GIT_COMMITTER_NAME=agent-runner GIT_COMMITTER_EMAIL=agent-runner@localhost
echo agent-runner-bundler-ready
while read -r job task branch caches haves; do
  [ -n "$job" ] || continue
  # shellcheck disable=SC2086 # one argument per have
  ( set -e; export GIT_WORK_TREE="$clones/$job"; bundle "$job" "$task" "$branch" "$caches" $haves ) </dev/null 2>"$tmp/agent-runner-bundle.err"
  # Not `if ! ( ... )`: set -e does nothing in an if's condition.
  # shellcheck disable=SC2181
  if [ $? != 0 ]; then
    echo "agent-runner-bundle $job failed $(tail -c 600 "$tmp/agent-runner-bundle.err" | tr '\n\r\t' '   ')"
  fi
  rm -rf "$GIT_DIR"/objects/[0-9a-f][0-9a-f] "$GIT_DIR"/refs/heads/agent-runner/* "$GIT_INDEX_FILE"
done
