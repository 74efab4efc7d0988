#!/usr/bin/env bash
# Starts the S3 server the tests run against (versitygw, posix backend) on
# 127.0.0.1 for a walkthrough, with a bucket "backups", and prints the
# variables of Longhorn's backup-target secret to use it. It runs until
# Ctrl-C. The data lives in a new temporary directory unless S3_ROOT names
# one; the port is 7070 unless S3_PORT says otherwise.
#
#   make s3-server          (or: internal/s3test/serve.sh)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
vgw="$(GO="${GO:-go}" "$here/install-versitygw.sh")"
port="${S3_PORT:-7070}"
root="${S3_ROOT:-$(mktemp -d "${TMPDIR:-/tmp}/caretaker-s3.XXXXXX")}"
access=caretaker
secret=caretaker-walkthrough
# With the posix backend a bucket is a directory of the root.
mkdir -p "$root/backups"

cat <<MSG
S3 server (versitygw) on http://127.0.0.1:$port, bucket "backups", data in $root.
In another terminal:

  export AWS_ACCESS_KEY_ID=$access AWS_SECRET_ACCESS_KEY=$secret AWS_ENDPOINTS=http://127.0.0.1:$port
  go run ./examples/backup-delete -prepare s3://backups@us-east-1/longhorn
  go run ./examples/backup-delete -target s3://backups@us-east-1/longhorn

Ctrl-C stops the server (the data stays in $root).
MSG
# Only what the server needs: versitygw reads many settings from VGW_* and
# ROOT_* variables, which must not leak in from the caller.
exec env -i PATH="$PATH" HOME="$HOME" "$vgw" --port "127.0.0.1:$port" --access "$access" --secret "$secret" \
  --region us-east-1 --quiet posix "$root"
