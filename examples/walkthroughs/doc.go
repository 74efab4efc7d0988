// Package walkthroughs runs the READMEs' walkthroughs as tests, so that
// what a reader sees there is what the tools print. It is a module of its
// own so that the script-test library it uses
// (github.com/rogpeppe/go-internal/testscript) never reaches the
// importers of caretaker.
//
// A walkthrough is a fenced block with no language whose lines start with
// "$ " (a command, continued by lines ending in a backslash) followed by
// what the command prints. Each block becomes a script: the commands run
// in order under sh in a fresh work directory ($WORK stands in for /tmp,
// and ./examples/ paths build from this checkout), and each command's
// output, standard output and error together, is compared with the
// README's, line by line, with what varies from run to run masked: a
// SHA-256, a date and time, the suffix of a temporary directory, and runs
// of spaces (a table's alignment follows its widest cell). A block that
// has a line "(output varies)" after a command is run but not compared.
package walkthroughs
