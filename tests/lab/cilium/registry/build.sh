#!/usr/bin/env bash
# Build the lab's OCI registry (main.go) and print its path; cached under
# ${XDG_CACHE_HOME:-$HOME/.cache}/maesh-ichor/bin/registry-<hash> (the hash covers main.go, go.mod and go.sum).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/maesh-ichor/bin"
mkdir -p "$cache"
hash=$(cat "$here/main.go" "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-16)
out="$cache/registry-$hash"
# one build at a time (two pytest workers, or scripts/test's prebuild, may ask at once): the second finds it built
exec 9>"$cache/.registry.lock"
# a caller that waits says so, and then whether the other build made the binary
if ! flock -n 9; then
    echo "registry/build.sh: another build holds $cache/.registry.lock: waiting for it to finish" >&2
    waited=$SECONDS
    until flock -w 60 9; do
        echo "registry/build.sh: still waiting for the other build ($((SECONDS - waited))s)" >&2
    done
    if [ -x "$out" ]; then
        echo "registry/build.sh: the other build finished after $((SECONDS - waited))s and made $out: nothing to build" >&2
    else
        echo "registry/build.sh: the other build finished after $((SECONDS - waited))s without $out" >&2
    fi
fi
if [ ! -x "$out" ]; then
    (cd "$here" && go build -trimpath -o "$out.tmp" . && mv "$out.tmp" "$out")
fi
echo "$out"
