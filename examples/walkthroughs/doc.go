// Package walkthroughs runs the READMEs' walkthroughs as tests, so that
// what a reader sees there is what the tools print. It is a module of its
// own so that the script-test library it uses
// (github.com/rogpeppe/go-internal/testscript) never reaches the
// importers of caretaker.
//
// Every README of the repository is read: the root's and each
// examples/*/README.md. A walkthrough is a fenced block with no language
// whose lines start with "$ " (a command, continued by lines ending in a
// backslash) followed by what the command prints. A README's blocks
// become one script: the commands run in order under sh in a fresh work
// directory ($WORK/tmp stands in for /tmp, ./examples/ paths build from
// this checkout, go run runs a tool built once and reports a failure as
// go run does, and a fixed loopback port becomes a free one), and each
// command's output, standard output and error together, is compared with
// the README's, line by line, with what varies from run to run masked: a
// SHA-256, a date and time, the suffix of a temporary directory, a
// loopback port, a filesystem ID, and runs of spaces (a table's alignment
// follows its widest cell).
//
// An HTML comment on the line before a block changes how it runs (see
// parseMarker): "skip: why" leaves it out, "background" starts servers,
// "output varies" runs it without comparing, "needs versitygw" runs the
// rest of the README only where the S3 server is installed. A block of
// commands in any README that is neither a walkthrough nor skipped with
// a reason fails TestEveryCommandBlockRuns, so a new command cannot
// escape the test unnoticed.
package walkthroughs
