#!/bin/sh
# copy-test: copy examples/kube, examples/controller-runtime and
# examples/scylla-operator into fresh
# modules outside this repository, the way an operator would, point
# caretaker at this checkout with a replace, and build and vet them.
# It fails if either example imports anything of caretaker's that is not
# public (internal/...), or anything of the repository beyond its own code.
# Then vendor-test.sh checks that a host vendoring caretaker builds offline.
#
# Module downloads come from the Go module proxy and land in the usual
# module cache, so a second run downloads nothing.
set -eu
GO=${GO:-go}
checkout=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/caretaker-copy-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export GOFLAGS=-mod=mod GOWORK=off

# copy DIR DEST: the example's own files, without nested modules.
copy() {
	mkdir -p "$2"
	(cd "$1" && find . -name go.mod -path './*/*' -exec dirname {} \; | sed 's|^\./||' >"$tmp/.nested")
	tar -C "$1" -cf - $(cd "$1" && ls -A | grep -vxF -f "$tmp/.nested" || true) | tar -C "$2" -xf -
}

# rename DIR OLD NEW: the module path OLD becomes NEW in every file.
rename() {
	grep -rlF "$2" "$1" | while read -r f; do sed -i "s|$2|$3|g" "$f"; done
}

kube=github.com/caretaker-storage/caretaker/examples/kube
cr=github.com/caretaker-storage/caretaker/examples/controller-runtime

echo "copy-test: examples/kube as example.com/operator/kube in $tmp/kube"
copy "$checkout/examples/kube" "$tmp/kube"
rename "$tmp/kube" "$kube" example.com/operator/kube
(cd "$tmp/kube" &&
	$GO mod edit -dropreplace github.com/caretaker-storage/caretaker \
		-replace "github.com/caretaker-storage/caretaker=$checkout" &&
	$GO build ./... && $GO vet ./...)

echo "copy-test: examples/controller-runtime as example.com/operator/cr in $tmp/cr"
copy "$checkout/examples/controller-runtime" "$tmp/cr"
rename "$tmp/cr" "$kube" example.com/operator/kube
rename "$tmp/cr" "$cr" example.com/operator/cr
(cd "$tmp/cr" &&
	$GO mod edit -dropreplace github.com/caretaker-storage/caretaker \
		-dropreplace example.com/operator/kube \
		-replace "github.com/caretaker-storage/caretaker=$checkout" \
		-replace "example.com/operator/kube=$tmp/kube" &&
	$GO build ./... && $GO vet ./...)

so=github.com/caretaker-storage/caretaker/examples/scylla-operator
echo "copy-test: examples/scylla-operator as example.com/operator/scylla in $tmp/so"
copy "$checkout/examples/scylla-operator" "$tmp/so"
rename "$tmp/so" "$kube" example.com/operator/kube
rename "$tmp/so" "$so" example.com/operator/scylla
(cd "$tmp/so" &&
	$GO mod edit -dropreplace github.com/caretaker-storage/caretaker \
		-dropreplace example.com/operator/kube \
		-replace "github.com/caretaker-storage/caretaker=$checkout" \
		-replace "example.com/operator/kube=$tmp/kube" &&
	$GO build ./... && $GO vet ./...)

# Nothing of caretaker's but its public packages: go build has already
# refused internal/ imports; this names any that slipped in as text.
if grep -rn 'caretaker-storage/caretaker/\(internal\|examples\)' "$tmp/kube" "$tmp/cr" "$tmp/so" --include='*.go'; then
	echo "copy-test: the copies still import caretaker's private or example packages" >&2
	exit 1
fi
echo "copy-test: ok"

# A host that vendors caretaker builds offline (and which modules it adds).
GO=$GO "$checkout/examples/hack/vendor-test.sh"
