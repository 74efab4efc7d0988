# Every check CI makes runs locally with `make test`.
# Tool versions are pinned here; `go run pkg@version` fetches them from the module proxy.

GO            ?= go
STATICCHECK   ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
BENCHTIME     ?= 1s
BENCHCOUNT    ?= 1
FUZZTIME      ?= 10s
PKGS          := ./...

.PHONY: all test checks versitygw s3-server walkthroughs fmt-check vet staticcheck unit build-examples cross-build copy-test bench fuzz generate quickstart kube-test

all: test

## test: everything CI checks, as a graph make runs three jobs at a time (-j3): gofmt,
## go vet and staticcheck; the versitygw install (a build, minutes on a fresh machine) and
## the module downloads, overlapped with them; tests under -race (salvage's qcow2 reader
## against qemu-img), those of the packages that need versitygw once it is installed, the
## others without waiting for it; the darwin and windows cross-builds; and the READMEs'
## walkthroughs, which build every example once (what make build-examples does) and run
## the READMEs with them. Each job's output is printed whole when it ends (--output-sync).
test:
	@$(MAKE) --no-print-directory -j3 --output-sync=target test-all TEST_GRAPH=1

# The order make follows when it can: what waits on the network or on versitygw first.
.PHONY: test-all downloads unit-local unit-s3 unit-s3-build
test-all: downloads versitygw unit-s3-build unit-local checks cross-build unit-s3 walkthroughs
# In make test's graph, what needs versitygw waits for the one install; alone
# (make unit, make walkthroughs), each installs it when it needs it.
ifdef TEST_GRAPH
unit-s3 walkthroughs: versitygw
endif

## downloads: the modules the main module, the walkthroughs and the Kubernetes examples
## need, fetched while the checks compile (network, not CPU).
downloads:
	@$(GO) mod download && \
	for m in examples/walkthroughs examples/kube examples/controller-runtime examples/scylla-operator; do \
	  (cd $$m && $(GO) mod download) || exit 1; \
	done

checks: fmt-check vet staticcheck

versitygw:
	@GO=$(GO) $(VERSITYGW_INSTALL) >/dev/null || echo "versitygw could not be installed: the S3 tests will skip" >&2

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

staticcheck:
	$(GO) run $(STATICCHECK) $(PKGS)

# The S3 store's tests run against a real versitygw; the script installs it
# into ~/.cache/caretaker on first use (a few minutes) and prints its path.
# Without it those tests skip and say so.
VERSITYGW_INSTALL := internal/s3test/install-versitygw.sh
WITH_VERSITYGW = vgw=$$(GO=$(GO) $(VERSITYGW_INSTALL)) || { echo "versitygw could not be installed: the S3 tests will skip" >&2; vgw=; }; VERSITYGW=$$vgw

# salvage's qcow2 reader is held to qemu-img (Debian's qemu-utils): installed
# here when missing and apt-get can run; without it those tests skip and say so.
QEMU_UTILS = command -v qemu-img >/dev/null 2>&1 || { echo "unit: installing Debian's qemu-utils for the qcow2 tests" >&2; \
	{ apt-get update -qq && apt-get install -y -qq qemu-utils >/dev/null; } || echo "unit: qemu-utils could not be installed: the qcow2 tests will skip" >&2; }

## s3-server: the S3 server the tests use (versitygw) on 127.0.0.1:7070 for the S3
## walkthrough, with printed credentials; runs until Ctrl-C.
s3-server:
	@GO=$(GO) internal/s3test/serve.sh

## unit: every package's tests under -race: unit-local, the packages that do not need
## versitygw, and unit-s3, those that do (found by go list: every package whose tests
## import internal/s3test, directly or not), once versitygw is installed. unit-s3-build
## compiles unit-s3's test binaries meanwhile, so that only their runs wait.
unit: unit-local unit-s3

S3TEST := github.com/caretaker-storage/caretaker/internal/s3test
S3TEST_USERS = s3=$$($(GO) list -test -f '{{.ImportPath}}{{range .Deps}}{{if eq . "$(S3TEST)"}} s3test{{end}}{{end}}' $(PKGS)) || exit 1; \
	s3=$$(printf '%s\n' "$$s3" | awk '$$1 ~ /\.test$$/ && ($$2 == "s3test" || $$1 == "$(S3TEST).test") { sub(/\.test$$/, "", $$1); print $$1 }')

unit-local:
	@$(QEMU_UTILS)
	@$(S3TEST_USERS); pkgs=$$($(GO) list $(PKGS)) || exit 1; pkgs=$$(printf '%s\n' "$$pkgs" | grep -vxF "$${s3:-/}"); \
	if [ -n "$$pkgs" ]; then $(GO) test -race -count=1 $$pkgs; fi

unit-s3-build:
	@$(S3TEST_USERS); \
	if [ -n "$$s3" ]; then $(GO) test -race -count=1 -exec /bin/true $$s3 >/dev/null; fi

unit-s3: unit-s3-build
	@$(S3TEST_USERS); \
	if [ -n "$$s3" ]; then $(WITH_VERSITYGW) $(GO) test -race -count=1 $$s3; fi

build-examples:
	$(GO) build -o /dev/null ./examples/...

# Longhorn disks are Linux-only, but hosts develop on laptops too: the
# library must at least compile there. What is checked is that every package
# compiles for darwin and windows: go list -export compiles without linking the
# tools, and without optimisation (-N -l), which the check does not need; about
# 60% of the CPU of two full builds.
cross-build:
	GOOS=darwin $(GO) list -export -gcflags=all='-N -l' -f '{{""}}' ./... >/dev/null
	GOOS=windows $(GO) list -export -gcflags=all='-N -l' -f '{{""}}' ./... >/dev/null

## walkthroughs: run the READMEs' walkthroughs (examples/walkthroughs, a module of its
## own) and compare what the tools print with what the READMEs show; the S3 one runs
## against the versitygw the S3 tests use.
walkthroughs:
	@$(WITH_VERSITYGW) sh -c 'cd examples/walkthroughs && $(GO) vet ./... && $(GO) test -count=1 ./...'

## copy-test: copy examples/kube, examples/controller-runtime and examples/scylla-operator into fresh modules
## outside this tree (with a replace to this checkout), then build and vet them:
## what an operator copying them gets. Reuses the module and build caches. Part of
## make kube-test, the Kubernetes half, not of make test.
copy-test:
	GO=$(GO) examples/hack/copy-test.sh

## bench: every benchmark, benchstat-friendly (set BENCHCOUNT=10 for benchstat).
bench:
	@$(WITH_VERSITYGW) $(GO) test -run='^$$' -bench=. -benchmem -benchtime=$(BENCHTIME) -count=$(BENCHCOUNT) $(PKGS)

## fuzz: each fuzz target for FUZZTIME.
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for t in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/^func //'); do \
	    echo "== $$pkg $$t"; \
	    $(GO) test -run='^$$' -fuzz="^$$t$$" -fuzztime=$(FUZZTIME) $$pkg; \
	  done; \
	done

## generate: regenerate mocks; each //go:generate line pins go.uber.org/mock/mockgen@v0.6.0.
generate:
	$(GO) generate $(PKGS)

quickstart:
	$(GO) run ./examples/quickstart

## kube-test: the copy test (above), then examples/kube, examples/controller-runtime and
## examples/scylla-operator (their own modules) against a real kube-apiserver and etcd on
## 127.0.0.1, the same two binaries for all three.
## The first run builds kube-apiserver and etcd (3.6, the release kube-apiserver v1.34.2
## is built against) from the module proxy into a cache (minutes), reused after.
kube-test: copy-test
	@apiserver=$$(examples/kube/hack/build-apiserver.sh) && etcd=$$(examples/kube/hack/build-etcd.sh) && \
	(cd examples/kube && $(GO) vet ./... && \
	  KUBE_APISERVER=$$apiserver ETCD=$$etcd CI=$${CI:-1} $(GO) test -race -count=1 ./...) && \
	(cd examples/controller-runtime && $(GO) vet ./... && \
	  KUBE_APISERVER=$$apiserver ETCD=$$etcd CI=$${CI:-1} $(GO) test -race -count=1 ./...) && \
	(cd examples/scylla-operator && $(GO) vet ./... && \
	  KUBE_APISERVER=$$apiserver ETCD=$$etcd CI=$${CI:-1} $(GO) test -race -count=1 ./...)

## scale: examples/kube's agent at 10, 50 and 100 nodes on a real kube-apiserver and etcd:
## RSS, requests and bytes per agent process, and the ratio of 100 to 10; then restart
## storms on 60 nodes with an agent process each (a third, then all at once): time to sync,
## 429s, start requests and bytes per agent, the API server's and etcd's peak RSS and CPU
## (minutes; not in CI); then a cold start of 60 agents at once with no orphan recorded
## yet: time to sync and to record, 429s, requests and bytes, peak RSS and CPU.
## CARETAKER_SCALE_REPLICAS sets the replicas per node (default 20),
## CARETAKER_SCALE_STORM_NODES the storm's nodes (default 60).
.PHONY: scale
scale:
	@apiserver=$$(examples/kube/hack/build-apiserver.sh) && etcd=$$(examples/kube/hack/build-etcd.sh) && \
	(cd examples/kube && KUBE_APISERVER=$$apiserver ETCD=$$etcd CI=1 CARETAKER_SCALE_REPORT=1 \
	  $(GO) test -count=1 -timeout 60m -run 'TestScaleReport$$|TestScaleStorm$$|TestScaleColdStart$$' -v ./agent/)
