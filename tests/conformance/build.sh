#!/usr/bin/env bash
# Build the conformance program (Go, against the real Talos machinery client) into
# a cache directory keyed by the hash of go.mod, go.sum and *.go, and print the
# binary's path. A second run with unchanged sources does not rebuild.
#   tests/conformance/build.sh            -> prints the path
#   GO=/path/to/go tests/conformance/build.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
go=${GO:-}
if [ -z "$go" ]; then
  go=$(command -v go || true)
  [ -n "$go" ] || { [ -x /usr/local/go/bin/go ] && go=/usr/local/go/bin/go; }
fi
if [ -z "$go" ]; then
  echo "conformance/build.sh: no Go toolchain found (set GO or put go on PATH)" >&2
  exit 127
fi
cd "$here"
# globs sort by the locale: pin it so the hash is the same everywhere
hash=$( (export LC_ALL=C; cat go.mod go.sum; for f in ./*.go; do echo "== $f"; cat "$f"; done
         "$go" env GOVERSION GOOS GOARCH) | sha256sum | cut -c1-16)
bindir=${XDG_CACHE_HOME:-$HOME/.cache}/maesh-ichor/bin
bin=$bindir/conformance-$hash
mkdir -p "$bindir"
# shellcheck source=tests/lab/build_lock.sh
. "$here/../lab/build_lock.sh"
build_lock conformance/build.sh "$bindir/.conformance.lock" "$bin"
if [ ! -x "$bin" ]; then
  tmp=$(mktemp "$bindir/.conformance-$hash.XXXXXX")
  trap 'rm -f "$tmp"' EXIT
  echo "conformance/build.sh: building $bin" >&2
  # -mod=readonly: go.sum must already hold every hash (no silent edits).
  GOFLAGS="${GOFLAGS:-} -mod=readonly" "$go" build -trimpath -o "$tmp" .
  chmod 0755 "$tmp"
  mv -f "$tmp" "$bin"
  trap - EXIT
  # binaries of older sources (about 50 MB each): keep only the newest few
  find "$bindir" -maxdepth 1 -name 'conformance-*' -type f -printf '%T@ %p\n' |
    sort -rn | tail -n +4 | cut -d' ' -f2- | xargs -r rm -f
fi
echo "$bin"
