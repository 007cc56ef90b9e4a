#!/usr/bin/env bash
# Runs the TypeScript and Python client programs against a real agenticd: builds it
# (into the temporary directory, with -race unless SMOKE_BUILD_FLAGS says otherwise),
# starts it on a free loopback port with its data and workspaces in a temporary
# directory, waits until its health service says SERVING, runs both clients, then
# stops it with SIGTERM. Whatever happens, agenticd is stopped and the temporary
# directory removed. Exits non-zero when any step failed.
set -euo pipefail
cd "$(dirname "$0")/.."

python=/usr/bin/python3 # Debian's python3-grpcio lives here, not in a pyenv python
tsx=node_modules/.bin/tsx
start_timeout=${SMOKE_START_TIMEOUT:-60}  # seconds until SERVING; cold SQLite/agent start-up
stop_timeout=${SMOKE_STOP_TIMEOUT:-20}    # seconds from SIGTERM to exit
client_timeout=${SMOKE_CLIENT_TIMEOUT:-30} # seconds any one client wait may take
turn_agent=acp.test.scripted              # runs clients/testdata/acp-turn.json
# With -race (the default, as for go test) a data race the clients provoke makes
# agenticd exit non-zero at shutdown, which fails this script.
read -r -a build_flags <<<"${SMOKE_BUILD_FLAGS--race}"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/agenticd-smoke.XXXXXX")
server_pid=""

stop_server() {
	[[ -n $server_pid ]] || return 0
	local pid=$server_pid
	server_pid=""
	kill -TERM "$pid" 2>/dev/null || return 0
	local waited=0
	while kill -0 "$pid" 2>/dev/null; do
		if ((waited >= stop_timeout * 10)); then
			echo "client-smoke: agenticd (pid $pid) still running ${stop_timeout}s after SIGTERM; killing it" >&2
			kill -KILL "$pid" 2>/dev/null || true
			wait "$pid" 2>/dev/null || true
			return 1
		fi
		sleep 0.1
		waited=$((waited + 1))
	done
	local status=0
	wait "$pid" || status=$?
	if ((status != 0)); then
		echo "client-smoke: agenticd exited with status $status after SIGTERM, want 0" >&2
		return 1
	fi
}

show_log() {
	echo "---- agenticd log (last 60 lines) ----" >&2
	tail -n 60 "$tmp/agenticd.log" >&2 || true
	echo "--------------------------------------" >&2
}

cleanup() {
	local status=$?
	if ! stop_server; then
		status=1
	fi
	# agenticd must have ended its agents; any left now would outlive this script.
	local leftover
	leftover=$(pgrep -f -- "$tmp/testagent" || true)
	if [[ -n $leftover ]]; then
		echo "client-smoke: agenticd left agent processes behind: ${leftover//$'\n'/ }; killing them" >&2
		for pid in $leftover; do kill -KILL "$pid" 2>/dev/null || true; done
		status=1
	fi
	if ((status != 0)); then
		show_log
	fi
	rm -rf "$tmp"
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "client-smoke: building agenticd (go build ${build_flags[*]}) and the scripted ACP test agent"
go build "${build_flags[@]}" -o "$tmp/agenticd" ./cmd/agenticd
go build -o "$tmp/testagent" ./presenters/acp/testagent

workspace_root="$tmp/workspaces"
workspace="$workspace_root/project"
mkdir -p "$tmp/data" "$workspace"
echo "hello from the client smoke test" >"$workspace/README.md"

# Port 0: agenticd picks a free port and logs it ("agenticd serving" addr=...), so no
# other process can take it between choosing and binding.
cat >"$tmp/agenticd.yaml" <<EOF
listen: 127.0.0.1:0
data_dir: $tmp/data
workspace_roots: [$workspace_root]
log_format: text
# deepchat.default is always registered; it needs no LLM to create sessions.
agents:
  - id: $turn_agent
    type: acp
    command: $tmp/testagent
    args: [-script, $PWD/clients/testdata/acp-turn.json]
    permission_timeout: 2m
EOF

# A token, so the clients' bearer header is exercised too (health needs none).
AGENTICD_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
export AGENTICD_TOKEN

echo "client-smoke: starting agenticd (data and workspaces in $tmp)"
HOME="$tmp" "$tmp/agenticd" --config "$tmp/agenticd.yaml" >"$tmp/agenticd.log" 2>&1 &
server_pid=$!

# Bounded wait: first for the address in the log, then for health SERVING.
addr=""
waited=0
while :; do
	if [[ -z $addr ]]; then
		addr=$(sed -n 's/.*msg="agenticd serving" addr=\([^ ]*\).*/\1/p' "$tmp/agenticd.log" | head -n 1)
	fi
	if [[ -n $addr ]] && "$python" clients/python/health.py --addr "$addr" --timeout 1 >"$tmp/health.txt" 2>&1; then
		break
	fi
	if ! kill -0 "$server_pid" 2>/dev/null; then
		status=0
		wait "$server_pid" || status=$?
		server_pid=""
		echo "client-smoke: agenticd exited (status $status) before it was SERVING" >&2
		exit 1
	fi
	if ((waited >= start_timeout * 5)); then
		if [[ -z $addr ]]; then
			echo "client-smoke: no 'agenticd serving addr=' line in agenticd's log after ${start_timeout}s" >&2
		else
			echo "client-smoke: agenticd at $addr not SERVING after ${start_timeout}s: $(cat "$tmp/health.txt")" >&2
		fi
		exit 1
	fi
	sleep 0.2
	waited=$((waited + 1))
done
echo "client-smoke: agenticd is SERVING on $addr"

failed=()
client_args=(--addr "$addr" --workspace "$workspace" --turn-agent "$turn_agent" --timeout "$client_timeout")

echo "client-smoke: TypeScript client"
"$tsx" clients/ts/smoke.ts "${client_args[@]}" || failed+=(typescript)

echo "client-smoke: Python client"
PYTHONDONTWRITEBYTECODE=1 "$python" clients/python/smoke.py "${client_args[@]}" || failed+=(python)

echo "client-smoke: stopping agenticd"
stop_server || failed+=("agenticd shutdown")

# The turns' effect on disk: the agent wrote the file only after a client allowed it.
if ! grep -qs "after the client allowed it" "$workspace/notes.txt"; then
	echo "client-smoke: $workspace/notes.txt was not written by the allowed edit" >&2
	failed+=("allowed edit")
fi

if ((${#failed[@]} > 0)); then
	echo "client-smoke: FAILED: ${failed[*]}" >&2
	exit 1
fi
echo "client-smoke: both clients passed"
