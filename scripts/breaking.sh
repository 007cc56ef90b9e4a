#!/usr/bin/env bash
# buf breaking against main: the working tree's proto must not break the API as it
# is on main. On a branch, the comparison point is where the branch left main, so
# that changes made on main since then are not blamed on the branch; on main itself
# it is main's last commit, which catches uncommitted breaking edits.
# BREAKING_AGAINST=<git ref> overrides the comparison point (e.g. HEAD~1).
# Skips, saying why, when there is nothing to compare with: no git repository, no
# main branch, or no proto at the comparison point.
set -euo pipefail
cd "$(dirname "$0")/.."
buf=${BUF:-node_modules/.bin/buf}

skip() {
	echo "breaking: skipped: $*"
	exit 0
}

git rev-parse --git-dir >/dev/null 2>&1 || skip "not a git repository"

if [[ -n ${BREAKING_AGAINST:-} ]]; then
	against=$(git rev-parse --verify -q "${BREAKING_AGAINST}^{commit}") ||
		{ echo "breaking: BREAKING_AGAINST=$BREAKING_AGAINST is not a commit in this repository" >&2; exit 1; }
	label=$BREAKING_AGAINST
else
	main=""
	for ref in refs/heads/main refs/remotes/origin/main; do
		if git rev-parse --verify -q "$ref^{commit}" >/dev/null; then
			main=$ref
			break
		fi
	done
	[[ -n $main ]] || skip "no main branch (local or origin/main) to compare with"
	# A shallow clone may not hold the fork point; main's tip is then the best there is.
	if against=$(git merge-base HEAD "$main" 2>/dev/null); then
		label="merge-base of HEAD and ${main#refs/*/}"
	else
		against=$(git rev-parse "$main^{commit}")
		label="${main#refs/*/} (no merge-base with HEAD in this clone)"
	fi
fi

if ! git cat-file -e "$against:buf.yaml" 2>/dev/null || [[ -z $(git ls-tree "$against" proto/) ]]; then
	skip "$label (${against:0:12}) has no buf.yaml or proto/ to compare with"
fi

echo "breaking: comparing proto/ with $label (${against:0:12})"
status=0
# proto/ alone: the workspace also holds Google's vendored google.rpc files
# (third_party/googleapis), which are not agenticd's to keep compatible, and a workspace
# with a different number of modules than the one compared with cannot be compared.
"$buf" breaking proto --against ".git#ref=$against,subdir=proto" || status=$?
if ((status == 100)); then
	echo "breaking: the changes above break the API as it is at $label; keep old fields and RPCs (deprecate them, reserve removed numbers, add new ones) instead" >&2
fi
exit "$status"
