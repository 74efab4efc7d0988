#!/usr/bin/env bash
# Builds the etcd server from the Go module proxy (module ../etcd, the
# version kube-apiserver v1.34.2 pins for its etcd client) into the same
# cache directory as build-apiserver.sh and prints the binary's path.
# A binary already in the cache is reused; delete it to rebuild.
#
# etcd 3.5 or newer answers watch progress requests; without them (Debian's
# etcd 3.4) kube-apiserver v1.34 serves every consistent list from etcd
# instead of its watch cache, which is not how a real cluster behaves.
#
#   KUBE_APISERVER_CACHE  directory for the binary
#                         (default ${XDG_CACHE_HOME:-$HOME/.cache}/caretaker)
set -euo pipefail

version=v3.6.4
here="$(cd "$(dirname "$0")/.." && pwd)"
cache="${KUBE_APISERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/caretaker}"
bin="$cache/etcd-$version"

if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$cache"
echo "build-etcd: building etcd $version into $bin (a few minutes on 2 cores with empty caches)" >&2
start=$(date +%s)
tmp="$bin.tmp.$$"
trap 'rm -f "$tmp"' EXIT
(cd "$here/etcd" && go build -trimpath -ldflags "-s -w" -o "$tmp" go.etcd.io/etcd/server/v3)
mv "$tmp" "$bin"
echo "build-etcd: built in $(( $(date +%s) - start ))s" >&2
echo "$bin"
