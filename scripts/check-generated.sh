#!/usr/bin/env bash
# Fails when gen/ differs from what `buf generate` makes of proto/ now: generates
# into a temporary directory and compares, leaving the working tree untouched.
set -euo pipefail
cd "$(dirname "$0")/.."
buf=${BUF:-node_modules/.bin/buf}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$buf" generate --output "$tmp"
if ! diff -r -x __pycache__ gen "$tmp/gen" >"$tmp/diff.txt"; then
	echo "check-generated: these generated files differ from proto/:" >&2
	grep -E '^(diff|Only in)' "$tmp/diff.txt" | sed "s#$tmp/gen#(fresh)gen#g" | head -n 40 >&2
	echo "gen/ is stale: run make generate and commit" >&2
	exit 1
fi
echo "check-generated: gen/ matches proto/"
