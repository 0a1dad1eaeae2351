# shellcheck shell=sh
# The envelope around every exec in the sandbox (envelope.rs beside it).
# Options a shell can take from the task's environment (bash reads SHELLOPTS):
# off before anything, so that no glob goes unexpanded and no trace shows the nonce.
set +a +C +e +f +u +v +x
IFS= read -r nonce || exit 125
mode=$1 keep=$2
shift 2
mark() { printf '\036%s %s\n' "$nonce" "$1"; }
mark started; mark end

# Counts live processes other than PID 1, the keep-alive and this shell; with a
# signal name, sends it to them. Builtins only, so no helper of ours is counted. A
# zombie is dead unless it has threads left: a leader that ended alone while its
# threads go on is a zombie that still runs.
sweep() {
  n=0
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    case "$p" in 1|"$keep"|"$$") continue ;; esac
    st='' th=''
    while read -r k v _; do
      case "$k" in State:) st=$v ;; Threads:) th=$v; break ;; esac
    done 2>/dev/null < "$d/status"
    case "$st$th" in ""|Z|Z1) continue ;; esac
    n=$((n + 1))
    [ -z "$1" ] || kill "-$1" "$p" 2>/dev/null
  done
}

# Sends signal $1 to every process but PID 1, the keep-alive and this shell without
# reading their status first: the shorter the pass, the fewer successors are born
# behind it.
signal_all() {
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    case "$p" in 1|"$keep"|"$$") ;; *) kill "-$1" "$p" 2>/dev/null ;; esac
  done
}

# `sweep $1`, believed only when no process was born while it looked: a chain of
# processes that each start a successor and end can be gone from every PID a sweep
# listed by the time it reads it, while the chain goes on. A birth counts as one
# live process. The PID namespace's last PID is /proc/loadavg's fifth field (read
# by the shell itself: a command would be a birth); where it does not move (gVisor
# says 0), the sweep alone.
look() {
  b='' a=''
  read -r _ _ _ _ b _ 2>/dev/null < /proc/loadavg
  sweep "$1"
  read -r _ _ _ _ a _ 2>/dev/null < /proc/loadavg
  [ "$n" != 0 ] || [ "$a" = "$b" ] || n=1
}

# TERM, up to 5 s grace, then STOP and KILL in passes until none is left and none
# born (a stopped process cannot fork, so a chain of processes cannot outrun it);
# reports "<found> <left>" as the record $1 (default "stopped").
stop_others() {
  record=${1:-stopped}
  look TERM
  found=$n
  i=0
  while [ "$n" != 0 ] && [ $i -lt 50 ]; do sleep 0.1; look ""; i=$((i + 1)); done
  i=0
  while [ "$n" != 0 ] && [ $i -lt 20 ]; do
    signal_all STOP; signal_all KILL; sleep 0.05; look ""; i=$((i + 1))
  done
  mark "$record"; echo "$found $n"; mark end
}

gitc() {
  git -c safe.directory='*' -c core.fsmonitor=false -c core.untrackedCache=false -c core.quotePath=false \
    --no-optional-locks -C __PROJECT__ "$@"
}

# Reports `git status` as "git-<label>"; after a run, the diff stat against the
# HEAD before it when tracked files changed or HEAD moved.
snapshot() {
  mark "git-$1"
  if ! command -v git >/dev/null 2>&1; then
    # The tools volume's static helper lists the files instead (files.rs).
    if [ -x __HELPER__ ]; then
      echo files; __HELPER__ snapshot __PROJECT__ 2>/dev/null; echo "exit $?"
    else
      echo nogit
    fi
    mark end; return
  fi
  st=$(gitc status --porcelain=v2 --branch --untracked-files=all 2>/dev/null)
  git_rc=$?
  printf '%s\n' "$st"
  echo "exit $git_rc"
  mark end
  head=
  case "$st" in "# branch.oid "*) head=${st#\# branch.oid }; head=${head%%
*} ;; esac
  if [ "$1" = before ]; then before=$head; return; fi
  # Untracked files count in the diff stat as new ones would: lines each, for
  # regular files up to 1 MiB (a worker's 2 GiB artefact is not read through). The
  # ./ keeps find from reading a name as an expression and tells files from wc's
  # totals.
  case "$st" in *"
? "*)
    mark untracked
    # shellcheck disable=SC2016 # "$@" and $f are the inner shell's
    (cd __PROJECT__ && gitc ls-files -z -o --exclude-standard -- ':!:.agent-runner' 2>/dev/null \
      | xargs -0 -r sh -c 'for f; do set -- "$@" "./$f"; shift; done
          exec find "$@" -maxdepth 0 -type f -size -1025k -exec wc -l {} +' sh 2>/dev/null)
    mark end ;;
  esac
  [ -n "$before" ] && [ "$before" != "(initial)" ] || return
  changed=0
  [ "$head" = "$before" ] || changed=1
  case "$st" in *"
1 "*|*"
2 "*|*"
u "*) changed=1 ;; esac
  [ $changed = 1 ] || return
  mark numstat
  gitc diff --numstat "$before" -- 2>/dev/null
  mark end
}

# `snapshot before` as a record only (its HEAD not kept for a diff after), given up
# after $1 seconds: git blocked on a FIFO the worker or the tests left says
# `no-before`, and the stop that follows ends it. Whether it was cut short is the
# snapshot's own status (killed: above 128), not the watchdog's, which a TERM could
# race. Told to end, the watchdog ends its sleep first, so that the stop finds
# nothing of it; its stderr is not the exec's (bash reports the killed sleep). (A
# wait, not a poll: a poll's sleeps cost the exec more than the snapshot.)
snapshot_within() {
  (snapshot before) & s=$!
  (
    trap 'kill -KILL $! 2>/dev/null; wait; exit 0' TERM
    sleep "$1" & wait $!
    kill -KILL "$s" 2>/dev/null
  ) 2>/dev/null & w=$!
  wait "$s" 2>/dev/null
  r=$?
  kill "$w" 2>/dev/null
  wait "$w" 2>/dev/null
  [ "$r" -le 128 ] || { mark end; mark no-before; mark end; }
}

# A file of agent-runner's that must not be in any argv (envelope.rs, PrivateFile):
# its contents come in the environment and are written by the shell's own printf
# (else cat from a here-document), into the container's private tmpfs, never
# through a link or FIFO left there; linked from under HOME when asked. The
# variables leave the environment before the command starts.
private_file() {
  [ -n "${AGENT_RUNNER_FILE_NAME-}" ] || return 0
  f=__PRIVATE__/$AGENT_RUNNER_FILE_NAME
  if [ -L "$f" ] || { [ -e "$f" ] && [ ! -f "$f" ]; }; then return 1; fi
  case $(command -V printf 2>/dev/null) in
    *builtin*) (umask 077 && printf '%s\n' "$AGENT_RUNNER_FILE" > "$f") || return 1 ;;
    *) (umask 077 && cat > "$f") <<EOF || return 1 ;;
$AGENT_RUNNER_FILE
EOF
  esac
  if [ -n "${AGENT_RUNNER_FILE_LINK-}" ]; then
    l=$HOME/$AGENT_RUNNER_FILE_LINK
    mkdir -p "${l%/*}" && ln -sfn "$f" "$l" || return 1
  fi
  unset AGENT_RUNNER_FILE AGENT_RUNNER_FILE_NAME AGENT_RUNNER_FILE_LINK
}

if ! private_file; then
  echo "agent-runner: cannot write ${AGENT_RUNNER_FILE_NAME-} in __PRIVATE__ (or link it from ~/${AGENT_RUNNER_FILE_LINK-})" >&2
  exit 125
fi

case "$mode" in
  before)
    # Within the exec's 30 s (sandbox.rs), with the stop's own time after it.
    snapshot_within 20
    stop_others
    exit 0 ;;
  worker|before-worker)
    before=$1
    shift
    # The first run of a container takes its snapshot before here (nothing of the
    # worker's has run yet); the agent's check comes after it (agent_files.rs).
    if [ "$mode" = before-worker ]; then snapshot before; stop_others stopped-before; fi
    if ! command -v "$1" >/dev/null 2>&1; then mark missing; echo "$1"; mark end; exit 127; fi
    # Nothing else runs now: the agent's check may start (agent_files.rs).
    mark agent; mark end
    "$@"
    rc=$?
    stop_others
    snapshot after
    exit $rc ;;
  test|test-before)
    "$@" </dev/null
    rc=$?
    stop_others
    # The snapshot before the next worker run, when nothing runs in the sandbox
    # between (docker.rs), and what git started stopped again. Given up, the worker
    # run's own exec tries it again.
    if [ "$mode" = test-before ]; then
      snapshot_within 10
      stop_others stopped-before
    fi
    exit $rc ;;
  stop)
    stop_others
    if [ "$1" = snapshot ]; then before=$2; snapshot after; fi
    exit 0 ;;
esac
exit 125
