#!/usr/bin/env bash
# Build the lab's OCI registry (main.go) and print its path; cached under
# ${XDG_CACHE_HOME:-$HOME/.cache}/maesh-ichor/bin/registry-<hash> (the hash covers main.go, go.mod and go.sum).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/maesh-ichor/bin"
mkdir -p "$cache"
hash=$(cat "$here/main.go" "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-16)
out="$cache/registry-$hash"
# shellcheck source=tests/lab/build_lock.sh
. "$here/../../build_lock.sh"
build_lock registry/build.sh "$cache/.registry.lock" "$out"
if [ ! -x "$out" ]; then
    (cd "$here" && go build -trimpath -o "$out.tmp" . && mv "$out.tmp" "$out")
fi
echo "$out"
