#!/usr/bin/env bash
# Fails when gen/ differs from what `buf generate` makes of proto/ (and third_party/) now, or web/dist from
# what scripts/build-web.sh makes of web/src: builds both into a temporary directory and
# compares, leaving the working tree untouched.
# Besides generated code, gen/ holds the hand-written package manifests and licence
# copies listed below (generation writes into src/ beside them and leaves them alone);
# anything else in gen/, such as the code of a removed .proto, is reported.
set -euo pipefail
cd "$(dirname "$0")/.."
buf=${BUF:-node_modules/.bin/buf}
manifests=(gen/ts/package.json gen/python/pyproject.toml gen/go/go.mod gen/go/go.sum
	gen/ts/LICENSE gen/python/LICENSE gen/go/LICENSE)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$buf" generate --output "$tmp"
for manifest in "${manifests[@]}"; do
	if [[ ! -f $manifest ]]; then
		echo "check-generated: $manifest is missing; it is written by hand, not generated: restore it from git" >&2
		exit 1
	fi
	cp "$manifest" "$tmp/$manifest"
done
# npm, setuptools and Go's module zips take only what lies under the package's
# directory, hence the copies.
for copy in gen/ts/LICENSE gen/python/LICENSE gen/go/LICENSE third_party/googleapis/LICENSE; do
	if ! cmp -s LICENSE "$copy"; then
		echo "check-generated: $copy differs from LICENSE: cp LICENSE $copy" >&2
		exit 1
	fi
done
# The packages carry one version, agenticd's (scripts/stamp-version.sh writes it).
scripts/stamp-version.sh --check
# Not compared: what Python, pip and npm leave beside the code when they run or
# install it (__pycache__, build, *.egg-info, node_modules).
if ! diff -r -x __pycache__ -x build -x '*.egg-info' -x node_modules gen "$tmp/gen" >"$tmp/diff.txt"; then
	echo "check-generated: these generated files differ from proto/:" >&2
	grep -E '^(diff|Only in)' "$tmp/diff.txt" | sed "s#$tmp/gen#(fresh)gen#g" | head -n 40 >&2
	echo "gen/ is stale: run make generate and commit" >&2
	exit 1
fi
echo "check-generated: gen/ matches proto/"

# The web page's bundle, built from the sources as they are now (and from gen/ts).
scripts/build-web.sh "$tmp/web-dist" >/dev/null
if ! diff -r web/dist "$tmp/web-dist" >"$tmp/web-diff.txt"; then
	echo "check-generated: web/dist differs from what web/src builds:" >&2
	grep -E '^(diff|Only in)' "$tmp/web-diff.txt" | sed "s#$tmp/web-dist#(fresh)web/dist#g" | head -n 20 >&2
	echo "web/dist is stale: run make web and commit" >&2
	exit 1
fi
echo "check-generated: web/dist matches web/src"
