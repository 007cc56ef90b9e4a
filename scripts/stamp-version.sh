#!/usr/bin/env bash
# Writes agenticd's version into the TypeScript and Python package manifests
# (gen/ts/package.json, gen/python/pyproject.toml), so that the packages carry the
# version of the agenticd they were made with. agenticd's own version is its Go module
# version, a git tag vX.Y.Z (internal/version reads it from the build); the packages
# take it without the "v".
#   scripts/stamp-version.sh           the tag at HEAD (fails when HEAD has none)
#   scripts/stamp-version.sh 0.3.0     that version
#   scripts/stamp-version.sh --check   fail unless both manifests name the same version,
#                                      and, when HEAD is tagged, the tag's
set -euo pipefail
cd "$(dirname "$0")/.."

ts=gen/ts/package.json
py=gen/python/pyproject.toml
ts_version() { node -p 'require("./gen/ts/package.json").version'; }
py_version() { sed -n 's/^version = "\(.*\)"$/\1/p' "$py"; }
tag_version() { git describe --tags --exact-match --match 'v[0-9]*' HEAD 2>/dev/null | sed 's/^v//'; }

if [[ ${1-} == --check ]]; then
	t=$(ts_version) p=$(py_version) tag=$(tag_version || true)
	if [[ $t != "$p" ]]; then
		echo "stamp-version: $ts says $t, $py says $p: run scripts/stamp-version.sh VERSION" >&2
		exit 1
	fi
	if [[ -n $tag && $tag != "$t" ]]; then
		echo "stamp-version: HEAD is tagged v$tag, the packages say $t: run scripts/stamp-version.sh" >&2
		exit 1
	fi
	exit 0
fi

version=${1:-$(tag_version)}
if [[ -z $version ]]; then
	echo "stamp-version: HEAD has no vX.Y.Z tag: name the version, e.g. scripts/stamp-version.sh 0.3.0" >&2
	exit 1
fi
# Both npm and pip accept a SemVer X.Y.Z (with an optional -pre-release part for npm).
if [[ ! $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
	echo "stamp-version: '$version' is not X.Y.Z" >&2
	exit 1
fi
# npm rewrites package.json itself, keeping its layout; no git commit or tag.
(cd gen/ts && npm version --no-git-tag-version --allow-same-version "$version" >/dev/null)
sed -i "s/^version = \".*\"$/version = \"$version\"/" "$py"
echo "stamp-version: $ts and $py now say $version"
