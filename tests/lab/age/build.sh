#!/usr/bin/env bash
# Build the reference age tools (filippo.io/age: cmd/age and cmd/age-keygen, at the version go.mod pins) and print
# the directory holding them; cached under ${XDG_CACHE_HOME:-$HOME/.cache}/maesh-ichor/bin/age-<hash> (the hash
# covers go.mod and go.sum). The backup tests open the collection's archives with them: a peer that shares none of
# its code (the collection encrypts with pyrage, a binding of the Rust age crate).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/maesh-ichor/bin"
mkdir -p "$cache"
hash=$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-16)
out="$cache/age-$hash"
# shellcheck source=tests/lab/build_lock.sh
. "$here/../build_lock.sh"
build_lock age/build.sh "$cache/.age.lock" "$out/age"
if [ ! -x "$out/age" ]; then
    mkdir -p "$out.tmp"
    (cd "$here" && go build -trimpath -o "$out.tmp/age" filippo.io/age/cmd/age \
        && go build -trimpath -o "$out.tmp/age-keygen" filippo.io/age/cmd/age-keygen)
    rm -rf "$out" && mv "$out.tmp" "$out"
fi
echo "$out"
