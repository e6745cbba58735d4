#!/usr/bin/env bash
# Build the lab's Kubernetes binaries from their Go modules (through the Go
# module proxy) and cache them:
#
#   kube-apiserver, kube-controller-manager, kubectl   k8s.io/kubernetes v1.36.3
#   etcd                                               go.etcd.io/etcd/server/v3 v3.6.16
#   etcdutl                                            go.etcd.io/etcd/etcdutl/v3 v3.6.16
#   helm                                               helm.sh/helm/v3 v3.21.4
#
# Binaries land in ${XDG_CACHE_HOME:-$HOME/.cache}/maesh-ichor/bin/<name>-<version>
# (override the folder with MAESH_ICHOR_KUBE_BIN). Next to each binary a
# <name>-<version>.key file holds a hash of the wrapper module (go.mod, go.sum,
# *.go), the link flags and the Go version; a binary whose key matches is not
# rebuilt.
#
# Usage: build.sh [--check] [NAME...]
#   NAME     only these binaries (default: all six)
#   --check  build nothing; exit 1 if any binary is missing or stale
# Prints one "name=path" line per binary on stdout; progress goes to stderr.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
gomod="$here/gomod"

KUBE_VERSION=v1.36.3
ETCD_VERSION=v3.6.16
HELM_VERSION=v3.21.4
# The Kubernetes version helm assumes when it has no cluster (helm template,
# lint): the k8s.io/client-go minor its go.mod pins, as helm's Makefile does.
HELM_K8S_MAJOR=1
HELM_K8S_MINOR=36

bin_dir=${MAESH_ICHOR_KUBE_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/maesh-ichor/bin}
all_names=(kube-apiserver kube-controller-manager kubectl etcd etcdutl helm)

log() { printf 'kube-lab build: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 2; }

check_only=0
names=()
for arg in "$@"; do
  case "$arg" in
    --check) check_only=1 ;;
    -h|--help) sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    kube-apiserver|kube-controller-manager|kubectl|etcd|etcdutl|helm) names+=("$arg") ;;
    *) die "unknown argument: $arg" ;;
  esac
done
if [ "${#names[@]}" -eq 0 ]; then
  names=("${all_names[@]}")
fi

version_of() {
  case "$1" in
    kube-apiserver|kube-controller-manager|kubectl) echo "$KUBE_VERSION" ;;
    etcd|etcdutl) echo "$ETCD_VERSION" ;;
    helm) echo "$HELM_VERSION" ;;
  esac
}

module_of() {
  case "$1" in
    kube-apiserver|kube-controller-manager|kubectl) echo kubernetes ;;
    etcd|etcdutl) echo etcd ;;
    helm) echo helm ;;
  esac
}

package_of() {
  case "$1" in
    kube-apiserver|kube-controller-manager|kubectl) echo "k8s.io/kubernetes/cmd/$1" ;;
    etcd) echo "." ;;
    etcdutl) echo "go.etcd.io/etcd/etcdutl/v3" ;;
    helm) echo "helm.sh/helm/v3/cmd/helm" ;;
  esac
}

ldflags_of() {
  local module=$1 flags=(-s -w) key val
  case "$module" in
    kubernetes)
      local minor=${KUBE_VERSION#v*.}
      minor=${minor%%.*}
      local -A kv=(
        [gitVersion]="$KUBE_VERSION"
        [gitMajor]="1"
        [gitMinor]="$minor"
        [gitCommit]="0000000000000000000000000000000000000000"
        [gitTreeState]="clean"
        [buildDate]="1970-01-01T00:00:00Z"
      )
      for key in gitVersion gitMajor gitMinor gitCommit gitTreeState buildDate; do
        val=${kv[$key]}
        flags+=(-X "k8s.io/component-base/version.$key=$val")
        flags+=(-X "k8s.io/client-go/pkg/version.$key=$val")
      done
      ;;
    etcd) ;;
    helm)
      flags+=(-X "helm.sh/helm/v3/internal/version.version=$HELM_VERSION")
      flags+=(-X "helm.sh/helm/v3/internal/version.gitTreeState=clean")
      flags+=(-X "helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=$HELM_K8S_MAJOR")
      flags+=(-X "helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$HELM_K8S_MINOR")
      flags+=(-X "helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=$HELM_K8S_MAJOR")
      flags+=(-X "helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$HELM_K8S_MINOR")
      ;;
  esac
  echo "${flags[*]}"
}

go_version() {
  if command -v go >/dev/null 2>&1; then
    go env GOVERSION
  else
    echo none
  fi
}

key_of() {
  local module=$1
  {
    go_version
    ldflags_of "$module"
    (cd "$gomod/$module" && find . -maxdepth 1 -type f \( -name go.mod -o -name go.sum -o -name '*.go' \) \
      | LC_ALL=C sort | xargs sha256sum)
  } | sha256sum | cut -c1-16
}

fresh() { # name -> 0 when the cached binary exists and its key matches
  local name=$1 version module path
  version=$(version_of "$name")
  module=$(module_of "$name")
  path="$bin_dir/$name-$version"
  [ -x "$path" ] && [ -f "$path.key" ] && [ "$(cat "$path.key")" = "$(key_of "$module")" ]
}

print_paths() {
  local name
  for name in "${names[@]}"; do
    echo "$name=$bin_dir/$name-$(version_of "$name")"
  done
}

if [ "$check_only" -eq 1 ]; then
  for name in "${names[@]}"; do
    fresh "$name" || { log "$name is missing or stale"; exit 1; }
  done
  print_paths
  exit 0
fi

command -v go >/dev/null 2>&1 || die "Go is not installed (need go >= 1.26 on PATH to build the lab's Kubernetes binaries)"
mkdir -p "$bin_dir"

# One build at a time on this machine: a second caller waits, says so (and
# every minute that it still waits), then finds the binaries fresh and builds
# nothing, or builds what the other build did not.
lock="$bin_dir/.build.lock"
exec 9>>"$lock"
if ! flock -n 9; then
  holder=$(cat "$lock.holder" 2>/dev/null || true)
  log "another build${holder:+ ($holder)} holds $lock: waiting for it to finish" \
      "(a cold build takes about ten minutes on 2 cores)"
  waited=$(date +%s)
  until flock -w 60 9; do
    log "still waiting for the other build ($(( $(date +%s) - waited ))s)"
  done
  waited=$(( $(date +%s) - waited ))
  left=()
  for name in "${names[@]}"; do
    fresh "$name" || left+=("$name")
  done
  if [ "${#left[@]}" -eq 0 ]; then
    log "the other build finished after ${waited}s; ${names[*]} are built: nothing to build"
  else
    log "the other build finished after ${waited}s; still to build: ${left[*]}"
  fi
fi
# who holds the lock, for a caller that waits (removed before the lock is let go, at exit)
printf 'pid %s, since %s\n' "$$" "$(date '+%H:%M:%S')" >"$lock.holder"
trap 'rm -f "$lock.holder"' EXIT

export CGO_ENABLED=0 GOWORK=off GOFLAGS="${GOFLAGS:-} -mod=readonly"

build_module() { # module name... : one go build for all of a module's stale binaries
  local module=$1; shift
  local name pkgs=() tmp start end key
  for name in "$@"; do
    pkgs+=("$(package_of "$name")")
  done
  tmp=$(mktemp -d "$bin_dir/.build-$module.XXXXXX")
  key=$(key_of "$module")
  log "building $* ($module module) ..."
  start=$(date +%s)
  if [ "$module" = etcd ]; then  # two commands of one module: one go build each, named by -o
    for name in "$@"; do
      (cd "$gomod/$module" && go build -p 2 -trimpath -ldflags "$(ldflags_of "$module")" -o "$tmp/$name" \
        "$(package_of "$name")")
    done
  else
    (cd "$gomod/$module" && go build -p 2 -trimpath -ldflags "$(ldflags_of "$module")" -o "$tmp/" "${pkgs[@]}")
  fi
  end=$(date +%s)
  for name in "$@"; do
    local dest
    dest="$bin_dir/$name-$(version_of "$name")"
    mv -f "$tmp/$name" "$dest"
    echo "$key" >"$dest.key"
  done
  rm -rf "$tmp"
  log "built $* in $((end - start))s"
}

for module in kubernetes etcd helm; do
  stale=()
  for name in "${names[@]}"; do
    if [ "$(module_of "$name")" = "$module" ] && ! fresh "$name"; then
      stale+=("$name")
    fi
  done
  if [ "${#stale[@]}" -gt 0 ]; then
    build_module "$module" "${stale[@]}"
  fi
done

print_paths
