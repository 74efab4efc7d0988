// Package s3test runs a real S3 server for tests: versitygw v1.8.0
// (github.com/versity/versitygw, Apache-2.0) with its posix backend on a
// temporary directory, listening on 127.0.0.1, and a reverse proxy in front
// of it that counts requests by S3 operation and injects faults (throttling,
// server errors, slow or truncated responses, dropped connections,
// redirects, hostile listings).
//
// The binary is found through $VERSITYGW, then PATH, then the cache
// directory install-versitygw.sh installs into
// (${XDG_CACHE_HOME:-$HOME/.cache}/caretaker/versitygw-v1.8.0/versitygw).
// `make test` runs that script and exports $VERSITYGW; without the binary
// the tests that need a server skip, saying how to get it.
//
// StartWith starts a server that speaks TLS only (versitygw's --cert and
// --key, for a test of a private CA) and that serves virtual-hosted-style
// buckets under a base domain (its --virtual-domain).
//
// A server is ready when a signed ListBuckets succeeds, so a test never
// races its start. It is stopped by its process id and its directory
// removed: Start's at the test's cleanup, Shared's when the test binary
// exits (through Main in the package's TestMain; the server also dies with
// the test process on Linux if Main is not used).
//
// Objects live as plain files: object key k of bucket b is the file
// Dir/b/k, which is how a test checks what is really stored without going
// through S3.
//
// Only tests import this package.
package s3test
