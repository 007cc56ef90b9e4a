#!/usr/bin/env bash
# Bundles the web page (web/src, web/index.html) into web/dist, which web/web.go embeds:
# one minified JS file and one CSS file, named by a hash of their content (so the server
# may let browsers cache them for good), and index.html pointing at them. The output
# depends only on the sources and the esbuild version in package-lock.json: no source
# maps, no paths of this machine. The bundle is committed, so building agenticd needs
# only Go; scripts/check-generated.sh fails when it is stale.
#
#   scripts/build-web.sh [OUTDIR]    (default web/dist)
set -euo pipefail
cd "$(dirname "$0")/.."
esbuild=${ESBUILD:-node_modules/.bin/esbuild}
out=${1:-web/dist}

if [[ ! -x $esbuild ]]; then
	echo "build-web: $esbuild is missing: run 'make deps' (npm ci) first" >&2
	exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$esbuild" web/src/app.ts web/src/app.css \
	--bundle --minify --format=esm --target=es2022 --charset=utf8 \
	--legal-comments=none --tsconfig=web/tsconfig.json \
	--outdir="$tmp/out" --log-level=warning

# Named by a hash of the content, computed here: esbuild's own [hash] also covers the
# checkout's absolute path, so two clones would name the same bundle differently.
hashed() {
	local sum
	sum=$(sha256sum "$tmp/out/$1.$2" | cut -c1-12)
	mv "$tmp/out/$1.$2" "$tmp/$1-$sum.$2"
	echo "$1-$sum.$2"
}
js=$(hashed app js)
css=$(hashed app css)
sed -e "s#\"\./app\.js\"#\"./$js\"#" -e "s#\"\./app\.css\"#\"./$css\"#" web/index.html >"$tmp/index.html"
if ! grep -qF "\"./$js\"" "$tmp/index.html" || ! grep -qF "\"./$css\"" "$tmp/index.html"; then
	echo "build-web: web/index.html must load \"./app.js\" and \"./app.css\" (the build rewrites them to the hashed names)" >&2
	exit 1
fi

# Replace the output whole, so bundles of earlier builds do not linger.
mkdir -p "$out"
find "$out" -mindepth 1 -delete
cp "$tmp/index.html" "$tmp/$js" "$tmp/$css" "$out/"
echo "build-web: $out/$js ($(wc -c <"$out/$js") bytes), $out/$css, $out/index.html"
