#!/usr/bin/env bash
# Builds kube-apiserver from the Go module proxy (module ../apiserver) into a
# cache directory outside the repository and prints the binary's path.
# A binary already in the cache is reused; delete it to rebuild.
#
#   KUBE_APISERVER_CACHE  directory for the binary
#                         (default ${XDG_CACHE_HOME:-$HOME/.cache}/caretaker)
set -euo pipefail

version=v1.34.2
here="$(cd "$(dirname "$0")/.." && pwd)"
cache="${KUBE_APISERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/caretaker}"
bin="$cache/kube-apiserver-$version"

if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$cache"
echo "build-apiserver: building kube-apiserver $version into $bin (several minutes on 2 cores)" >&2
start=$(date +%s)
tmp="$bin.tmp.$$"
trap 'rm -f "$tmp"' EXIT
# The version variables make /version report the release instead of v0.0.0-master.
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=34 -X $pkg.gitTreeState=clean"
(cd "$here/apiserver" && go build -trimpath -ldflags "$ldflags" -o "$tmp" k8s.io/kubernetes/cmd/kube-apiserver)
mv "$tmp" "$bin"
echo "build-apiserver: built in $(( $(date +%s) - start ))s" >&2
echo "$bin"
