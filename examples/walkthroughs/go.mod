module github.com/caretaker-storage/caretaker/examples/walkthroughs

go 1.25.0

require github.com/rogpeppe/go-internal v1.14.1

require (
	golang.org/x/sys v0.26.0 // indirect
	golang.org/x/tools v0.26.0 // indirect
)
