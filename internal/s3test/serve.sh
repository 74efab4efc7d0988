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
# $VERSITYGW names a binary already installed (make passes the one it installed).
if [ -n "${VERSITYGW:-}" ] && [ -x "$VERSITYGW" ]; then
  vgw="$VERSITYGW"
else
  vgw="$(GO="${GO:-go}" "$here/install-versitygw.sh")"
fi
port="${S3_PORT:-7070}"
root="${S3_ROOT:-$(mktemp -d "${TMPDIR:-/tmp}/caretaker-s3.XXXXXX")}"
access=caretaker
secret=caretaker-walkthrough
# With the posix backend a bucket is a directory of the root.
mkdir -p "$root/backups"

# Only what the server needs: versitygw reads many settings from VGW_* and
# ROOT_* variables, which must not leak in from the caller.
env -i PATH="$PATH" HOME="$HOME" "$vgw" --port "127.0.0.1:$port" --access "$access" --secret "$secret" \
  --region us-east-1 --quiet posix "$root" &
server=$!
# A background job of a script ignores SIGINT: stop it with SIGTERM.
trap 'kill -TERM "$server" 2>/dev/null; wait "$server"' INT TERM
# Ready once it accepts connections (bash's /dev/tcp), at most 30 s.
listening=
for _ in $(seq 300); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then listening=1; break; fi
  kill -0 "$server" 2>/dev/null || { wait "$server"; echo "s3-server: versitygw exited before it listened on 127.0.0.1:$port" >&2; exit 1; }
  sleep 0.1
done
[ -n "$listening" ] || { kill "$server"; echo "s3-server: versitygw did not listen on 127.0.0.1:$port within 30 s" >&2; exit 1; }

cat <<MSG
S3 server (versitygw) on http://127.0.0.1:$port, bucket "backups", data in $root.
In another terminal:

  export AWS_ACCESS_KEY_ID=$access AWS_SECRET_ACCESS_KEY=$secret AWS_ENDPOINTS=http://127.0.0.1:$port
  go run ./examples/backup-delete -prepare s3://backups@us-east-1/longhorn
  go run ./examples/backup-delete -target s3://backups@us-east-1/longhorn

s3-server ready; Ctrl-C stops it (the data stays in $root).
MSG
wait "$server"
