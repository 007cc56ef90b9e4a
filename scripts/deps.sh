#!/usr/bin/env bash
# Installs what building, generating and testing agenticd needs on a Debian machine
# that has only Go, node and npm. Idempotent: each step runs only when its result is
# missing or stale, so a second run takes about a second.
set -euo pipefail
cd "$(dirname "$0")/.."

# protoc and the gRPC Python plugin feed `buf generate` (gen/python); grpcio and
# protobuf run the Python client. Debian's versions are the ones gen/python is made
# with: code from a newer protoc would not load on this runtime. venv, pip and setuptools
# install gen/python as a package (scripts/package-check.sh). procps gives the
# confinement tests ps, to look for processes a session left behind. chromium runs the
# web page's end-to-end test (e2e/browser_test.go drives /usr/bin/chromium headless).
# postgresql (Debian 12's, 15.x) gives the tests of the Postgres store a real server:
# internal/pgtest runs a throw-away cluster from /usr/lib/postgresql/*/bin in a temp dir.
apt_packages=(protobuf-compiler protobuf-compiler-grpc python3-grpcio python3-protobuf python3-venv python3-pip python3-setuptools procps chromium postgresql)

missing=()
for pkg in "${apt_packages[@]}"; do
	if ! dpkg -s "$pkg" 2>/dev/null | grep -q '^Status: install ok installed$'; then
		missing+=("$pkg")
	fi
done
if ((${#missing[@]} > 0)); then
	echo "deps: installing Debian packages: ${missing[*]}"
	sudo=()
	if [[ $(id -u) -ne 0 ]]; then
		if ! command -v sudo >/dev/null; then
			echo "deps: need root to install ${missing[*]}: run 'make deps' as root or install them with apt-get" >&2
			exit 1
		fi
		sudo=(sudo)
	fi
	"${sudo[@]}" apt-get update -q
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# node_modules is current when it was installed from this exact package-lock.json.
# `npm ci` installs exactly what the lock pins and never rewrites it, so a fresh clone
# stays clean; the lock lists every platform's build of @bufbuild/buf and esbuild, as the
# registry serves them (refresh it with `npm install --package-lock-only`).
lock_stamp=node_modules/.agenticd-package-lock.sha256
lock_sum=$(sha256sum package-lock.json | cut -d' ' -f1)
if [[ ! -f $lock_stamp || $(cat "$lock_stamp") != "$lock_sum" ]]; then
	echo "deps: npm ci (node_modules missing or not installed from this package-lock.json)"
	npm ci --no-audit --no-fund --loglevel=error
	echo "$lock_sum" >"$lock_stamp"
fi

# The real agents whose lock npm ci would refuse (they name optional platform packages
# the registry does not serve) have a package of their own, installed without a lock at
# the exact versions its package.json pins: e2e/realagents_test.go runs them.
agents_stamp=e2e/realagents/node_modules/.agenticd-package.sha256
agents_sum=$(sha256sum e2e/realagents/package.json | cut -d' ' -f1)
if [[ ! -f $agents_stamp || $(cat "$agents_stamp") != "$agents_sum" ]]; then
	echo "deps: npm install in e2e/realagents (missing or not installed from this package.json)"
	(cd e2e/realagents && npm install --no-package-lock --no-audit --no-fund --loglevel=error)
	echo "$agents_sum" >"$agents_stamp"
fi

go mod download
# staticcheck, for make lint: a module of its own (tools/go.mod), so that its
# dependencies stay out of agenticd's.
(cd tools && go mod download)
# gen/go, the API for Go programs, is a module of its own with its own (older) minimums.
(cd gen/go && go mod download)
# deploy/validate is a module of its own (k8s.io/api, Envoy's API): make deploy-check.
(cd deploy/validate && go mod download)
