# agenticd: build, generate, lint and test. `make build` and `make run` need Go and a C
# compiler (cgo builds SQLite).
# `make test` is what CI runs (.ci/run); on a fresh Debian machine with Go, node and
# npm it installs the rest itself (as root: apt-get for protoc and Python gRPC,
# node_modules from package-lock.json with `npm ci`, go mod download).

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build
# The steps of `test` share the working tree and the machine's two cores: one at a time.
.NOTPARALLEL:

BUF := node_modules/.bin/buf
TSC := node_modules/.bin/tsc
PYTHON := /usr/bin/python3
# -race for the tests and for the agenticd the client smoke test runs: it costs a
# cgo build of SQLite with -race (~75 s cold) and 2-10x test time. Override with
# `make test GO_TEST_FLAGS=` for a quick run.
GO_TEST_FLAGS ?= -race
GO_TEST_PKGS ?= ./...
# Arguments for `make run`, e.g. `make run RUN_ARGS='--listen 127.0.0.1:6000'`.
RUN_ARGS ?=

.PHONY: deps generate web lint check-generated breaking build cc-check run test tree-unchanged go-test deploy-check client-smoke package-check bench clean

## deps: install protoc, the gRPC Python plugin and runtime (apt), node_modules, Go modules
deps:
	scripts/deps.sh

## generate: regenerate gen/ (Go, TypeScript, Python) from proto/, and the web page's bundle (web/dist) on it
generate: deps
	$(BUF) generate
	scripts/build-web.sh

## web: bundle the web page (web/src) into web/dist, which agenticd embeds; commit the result
web: deps
	scripts/build-web.sh

## lint: buf lint, gofmt, go vet (also of gen/go, a module of its own), staticcheck, the TypeScript client's and the web page's types, the Python client's syntax
lint: deps
	$(BUF) lint
	@unformatted=$$(find . \( -path ./node_modules -o -path ./.git \) -prune -o -name '*.go' -print | xargs gofmt -l); \
	if [[ -n $$unformatted ]]; then echo "gofmt: these files need 'gofmt -w':"; echo "$$unformatted"; exit 1; fi
	go vet ./...
	cd gen/go && go vet ./...
	go tool -modfile=tools/go.mod staticcheck ./...
	$(TSC) -p clients/ts/tsconfig.json
	$(TSC) -p web/tsconfig.json
	PYTHONDONTWRITEBYTECODE=1 $(PYTHON) -c 'import ast, sys; [ast.parse(open(f).read(), f) for f in sys.argv[1:]]' clients/python/*.py

## check-generated: fail when gen/ is not what proto/ generates, or web/dist not what web/src builds
check-generated: deps
	scripts/check-generated.sh

## breaking: buf breaking against main (skips, saying why, when there is no main to compare)
breaking: deps
	scripts/breaking.sh

## build: agenticd and agenticctl into bin/ (Go alone; the benchmark program is `make bench`'s)
build: cc-check
	go build -o bin/ ./cmd/agenticd ./cmd/agenticctl

# SQLite is built with cgo: without a C compiler Go leaves its cgo files out and the build
# fails with undefined sqlite3 names, which says nothing of the cause.
cc-check:
	@if [[ "$$(go env CGO_ENABLED)" != 1 ]] || ! command -v "$$(go env CC | cut -d' ' -f1)" >/dev/null; then \
		echo "agenticd needs a C compiler to build SQLite (cgo): install gcc (Debian: apt-get install gcc), and keep CGO_ENABLED=1" >&2; exit 1; \
	fi

## run: agenticd with its defaults (127.0.0.1:50051, data under ~/.local/share/agenticd); needs Go and a C compiler
run: build
	bin/agenticd $(RUN_ARGS)

## test: everything CI checks, and that it left the working tree as it found it
test: deps lint check-generated breaking deploy-check go-test client-smoke package-check tree-unchanged

# git status as it was when make started (read only when the goal needs it), handed to
# the recipe through the environment so that no file name is spliced into the command.
ifneq ($(filter test tree-unchanged,$(MAKECMDGOALS)),)
export TREE_BEFORE := $(shell git status --porcelain 2>/dev/null)
endif
tree-unchanged:
	@after=$$(git status --porcelain 2>/dev/null | tr '\n' ' ' | sed 's/ $$//'); \
	if [[ "$$after" != "$$TREE_BEFORE" ]]; then \
		echo "make test changed the working tree (a step wrote a file it should not):"; \
		git status --short; exit 1; \
	fi

# CI: a test whose tool deps installs (Postgres, Chromium, npm packages) fails, not
# skips, without it.
go-test: deps
	CI=$${CI:-true} go test $(GO_TEST_FLAGS) $(GO_TEST_PKGS)

## deploy-check: the manifests and the Envoy config under deploy/, decoded strictly into their API types and checked (deploy/validate: a Go module of its own, so that k8s.io/api and Envoy's API stay out of agenticd's)
deploy-check: deps
	cd deploy/validate && go vet ./... && go test ./...

## client-smoke: the TypeScript and Python smoke clients and the Go, TypeScript and Python examples against a real agenticd (built with GO_TEST_FLAGS)
client-smoke: deps
	SMOKE_BUILD_FLAGS='$(GO_TEST_FLAGS)' scripts/client-smoke.sh

## package-check: install gen/ts (packed) and gen/python (pip, into a venv) as a stranger would, outside the repository, and use them (~15 s)
package-check: deps
	scripts/package-check.sh

## bench: the Go benchmarks, the load program against a real agenticd, profiles, docs/BENCHMARKS.md
bench: deps
	bash bench/run.sh

clean:
	rm -rf bin gen/python/build gen/python/src/*.egg-info
	find gen/python clients/python -name __pycache__ -type d -prune -exec rm -rf {} +
