#!/bin/sh
# vendor-test: a host that vendors caretaker builds offline.
#
# It makes a tiny host module outside this repository that already uses
# the Kubernetes libraries (k8s.io/client-go, api, apimachinery at
# $K8S_VERSION), as Longhorn's manager does, and vendors it twice with
# `go mod vendor`: once without caretaker, once importing caretaker (a
# replace to this checkout). It prints the modules caretaker adds to the
# vendor tree, or raises, and then builds and vets the host with
# GOFLAGS=-mod=vendor, GOPROXY=off and an empty module cache: nothing but
# vendor/ may be needed.
#
# HOST_PKGS chooses what the host imports: "longhorn" (orphan, diskscan,
# instance: what a Longhorn adopter uses) or "all" (every public package,
# test helpers and mocks included). Default: both, one after the other.
#
# Module downloads for the two `go mod tidy` runs come from the Go module
# proxy into the usual module cache, so a second run downloads nothing.
set -eu
GO=${GO:-go}
K8S_VERSION=${K8S_VERSION:-v0.34.3}
checkout=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/caretaker-vendor-test.XXXXXX")
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
export GOWORK=off GOFLAGS=-mod=mod
mod=github.com/caretaker-storage/caretaker

# The public packages of caretaker, as an importer sees them.
all_pkgs=$(cd "$checkout" && $GO list ./... | grep -v -e "^$mod/internal" -e "^$mod/examples" -e '/internal/')
longhorn_pkgs="$mod/orphan $mod/diskscan $mod/instance"

# host DIR PKGS...: a host module in DIR whose main imports the Kubernetes
# libraries and PKGS (blank imports), tidied and vendored.
host() {
	dir=$1
	shift
	mkdir -p "$dir"
	{
		echo "module example.com/lhhost"
		echo
		echo "go 1.25.0"
		echo
		echo "require ("
		echo "	k8s.io/api $K8S_VERSION"
		echo "	k8s.io/apimachinery $K8S_VERSION"
		echo "	k8s.io/client-go $K8S_VERSION"
		if [ $# -gt 0 ]; then echo "	$mod v0.0.0-00010101000000-000000000000"; fi
		echo ")"
		if [ $# -gt 0 ]; then echo; echo "replace $mod => $checkout"; fi
	} >"$dir/go.mod"
	{
		echo "package main"
		echo
		echo "import ("
		echo '	"fmt"'
		echo
		echo '	corev1 "k8s.io/api/core/v1"'
		echo '	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"'
		echo '	"k8s.io/client-go/dynamic"'
		for p in "$@"; do echo "	_ \"$p\""; done
		echo ")"
		echo
		echo "var _ dynamic.Interface"
		echo
		echo "func main() { fmt.Println(corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: \"x\"}}.Name) }"
	} >"$dir/main.go"
	(cd "$dir" && $GO mod tidy && $GO mod vendor)
}

# modules FILE: "path version" of every module vendor/modules.txt lists.
modules() {
	sed -n 's/^# \([^ ]*\) \([^ ]*\).*/\1 \2/p' "$1" | sort
}

echo "vendor-test: a host with only the Kubernetes libraries ($K8S_VERSION)"
host "$tmp/base"
modules "$tmp/base/vendor/modules.txt" >"$tmp/base.txt"

for which in ${HOST_PKGS:-longhorn all}; do
	case $which in
	longhorn) pkgs=$longhorn_pkgs ;;
	all) pkgs=$all_pkgs ;;
	*) echo "vendor-test: HOST_PKGS=$which: want longhorn or all" >&2; exit 2 ;;
	esac
	echo "vendor-test: the same host importing caretaker ($which: $(echo $pkgs | wc -w) packages)"
	# shellcheck disable=SC2086
	host "$tmp/$which" $pkgs
	modules "$tmp/$which/vendor/modules.txt" >"$tmp/$which.txt"
	echo "vendor-test: modules caretaker adds or changes in the vendor tree ($which):"
	# Added: a path the base tree lacks; changed: a path whose version moved.
	awk 'NR == FNR { base[$1] = $2; next }
		$1 == "'$mod'" { next }
		!($1 in base) { print "  + " $1 " " $2; next }
		base[$1] != $2 { print "  ~ " $1 " " base[$1] " -> " $2 }' "$tmp/base.txt" "$tmp/$which.txt" | tee "$tmp/$which.diff"
	[ -s "$tmp/$which.diff" ] || echo "  (none)"

	echo "vendor-test: building the $which host offline (GOFLAGS=-mod=vendor GOPROXY=off, empty module cache)"
	mkdir -p "$tmp/empty-modcache"
	# -trimpath keeps the temporary directory out of the build cache's
	# keys, so a second run reuses the compiled vendor tree.
	(cd "$tmp/$which" &&
		GOFLAGS="-mod=vendor -trimpath" GOPROXY=off GOMODCACHE="$tmp/empty-modcache" $GO build -o /dev/null ./... &&
		GOFLAGS="-mod=vendor -trimpath" GOPROXY=off GOMODCACHE="$tmp/empty-modcache" $GO vet ./...)
	if [ -n "$(ls -A "$tmp/empty-modcache")" ]; then
		echo "vendor-test: the offline build wrote to the module cache: it needed more than vendor/" >&2
		exit 1
	fi
done
echo "vendor-test: ok"
