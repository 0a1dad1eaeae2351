# shellcheck shell=sh
# The sandbox's main process without egress (socket.rs beside it). Arguments:
# pairs MOUNT LINK, for the agent's login file: LINK (relative to HOME) becomes a
# link to MOUNT when MOUNT is there, and LINK's directory is created either way
# (codex exits without its home). Then it reports its pid and reads stdin until
# end-of-file.
set -e
while [ $# -ge 2 ]; do
  link="$HOME/$2"
  mkdir -p "${link%/*}"
  if [ -e "$1" ]; then ln -sf "$1" "$link"; fi
  shift 2
done
echo "agent-runner-ready $$"
exec cat >/dev/null
