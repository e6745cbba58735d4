# Sourced by the lab's build scripts: one build at a time (two pytest workers, or scripts/test's prebuild, may ask at
# once), and a caller that waits says so, then what the other build left.
# build_lock WHO LOCKFILE [BINARY]: hold LOCKFILE on file descriptor 9 until the script ends; while another build
# holds it, say so every minute; once it is free, say whether that build made BINARY.
build_lock() {
  local who=$1 lock=$2 binary=${3:-} since=$SECONDS
  exec 9>"$lock"
  flock -n 9 && return 0
  echo "$who: another build holds $lock: waiting for it to finish" >&2
  until flock -w 60 9; do
    echo "$who: still waiting for the other build ($((SECONDS - since))s)" >&2
  done
  if [ -z "$binary" ]; then
    echo "$who: the other build finished after $((SECONDS - since))s" >&2
  elif [ -x "$binary" ]; then
    echo "$who: the other build finished after $((SECONDS - since))s and made $binary: nothing to build" >&2
  else
    echo "$who: the other build finished after $((SECONDS - since))s without $binary" >&2
  fi
}
