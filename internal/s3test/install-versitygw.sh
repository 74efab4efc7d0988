#!/usr/bin/env bash
# Installs versitygw v1.8.0 (Apache-2.0, github.com/versity/versitygw), the S3
# server the S3 tests run against, into a cache directory outside the
# repository, and prints the binary's path. A binary already there is reused;
# delete it to reinstall.
#
#   VERSITYGW_CACHE  directory for the binary
#                    (default ${XDG_CACHE_HOME:-$HOME/.cache}/caretaker/versitygw-v1.8.0,
#                    where internal/s3test looks for it)
#   GO               the go command (default go)
set -euo pipefail

version=v1.8.0
cache="${VERSITYGW_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/caretaker/versitygw-$version}"
bin="$cache/versitygw"

if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$cache"
echo "install-versitygw: installing versitygw $version into $cache (a few minutes on 2 cores)" >&2
start=$(date +%s)
# go install writes straight to GOBIN; build into a private directory and move
# the binary into place so that an interrupted install leaves nothing half-written.
tmp="$(mktemp -d "$cache/.install.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
# Outside any module, so that this repository's go.mod plays no part; without
# the symbol table and DWARF (-s -w), which a test server needs neither of and
# which the link would spend time on.
(cd "$tmp" && GOBIN="$tmp" GOFLAGS=-trimpath "${GO:-go}" install -ldflags="-s -w" "github.com/versity/versitygw/cmd/versitygw@$version")
mv "$tmp/versitygw" "$bin"
echo "install-versitygw: installed in $(( $(date +%s) - start ))s" >&2
echo "$bin"
