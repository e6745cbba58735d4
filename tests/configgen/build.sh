#!/usr/bin/env bash
# Build the configgen binaries (one per machinery version) and print their paths, one per line:
#   <version> <path>
# Binaries are cached under ${XDG_CACHE_HOME:-$HOME/.cache}/maesh-ichor/bin/configgen-<ver>-<hash>, where the
# hash covers src/*.go and the version directory, so an unchanged generator is not rebuilt.
#
# usage: tests/configgen/build.sh [--tidy] [v1.12 v1.13 v1.14]
#   --tidy   run `go mod tidy` in the assembled module and copy go.mod/go.sum back (maintainers only)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/maesh-ichor/bin"
tidy=0
versions=()

for arg in "$@"; do
    case "$arg" in
        --tidy) tidy=1 ;;
        v1.*) versions+=("$arg") ;;
        *) echo "usage: $0 [--tidy] [v1.12 v1.13 v1.14]" >&2; exit 2 ;;
    esac
done

if [ ${#versions[@]} -eq 0 ]; then
    versions=(v1.12 v1.13 v1.14)
fi

if ! command -v go >/dev/null 2>&1; then
    echo "build.sh: go is not installed (needed: Go >= 1.26.5)" >&2
    exit 1
fi

mkdir -p "$cache"
# shellcheck source=tests/lab/build_lock.sh
. "$here/../lab/build_lock.sh"
build_lock build.sh "$cache/.configgen.lock"

for ver in "${versions[@]}"; do
    vdir="$here/$ver"
    if [ ! -f "$vdir/go.mod" ]; then
        echo "build.sh: no module for $ver at $vdir" >&2
        exit 2
    fi

    if [ "$tidy" = 1 ]; then
        work="$(mktemp -d)"
        cp "$here"/src/*.go "$vdir"/*.go "$vdir/go.mod" "$work/"
        if [ -f "$vdir/go.sum" ]; then
            cp "$vdir/go.sum" "$work/"
        fi
        (cd "$work" && go mod tidy >&2)
        cp "$work/go.mod" "$work/go.sum" "$vdir/"
        rm -rf "$work"
    fi

    hash="$( (cd "$here" && cat src/*.go "$ver"/*.go "$ver/go.mod" "$ver/go.sum"; go version) | sha256sum | cut -c1-16)"
    bin="$cache/configgen-$ver-$hash"

    if [ -x "$bin" ] && [ -n "${waited:-}" ]; then
        echo "build.sh: $ver is built: nothing to build" >&2
    fi
    if [ ! -x "$bin" ]; then
        work="$(mktemp -d)"
        # shellcheck disable=SC2064
        trap "rm -rf '$work'" EXIT
        cp "$here"/src/*.go "$vdir"/*.go "$vdir/go.mod" "$vdir/go.sum" "$work/"
        start=$SECONDS
        (cd "$work" && GOFLAGS=-mod=readonly go build -p 2 -trimpath -o "$bin.tmp" .)
        mv "$bin.tmp" "$bin"
        # drop this version's binaries of older sources (kept an hour, for test runs still using them)
        find "$cache" -maxdepth 1 -name "configgen-$ver-*" ! -name "configgen-$ver-$hash" -mmin +60 -delete
        echo "build.sh: built $ver in $((SECONDS - start))s" >&2
        rm -rf "$work"
        trap - EXIT
    fi

    echo "$ver $bin"
done
