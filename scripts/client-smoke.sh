#!/usr/bin/env bash
# Runs the TypeScript and Python client programs and the Go, TypeScript and Python
# examples against a real agenticd: builds it and the Go example (into the temporary
# directory, with -race unless SMOKE_BUILD_FLAGS says otherwise), starts it on a free
# loopback port with its data and workspaces in a temporary directory, waits until its
# health service says SERVING, runs the clients and the examples, then stops it with
# SIGTERM. Whatever happens, agenticd is stopped and the temporary
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

# clients/README.md shows parts of the examples: every block marked
# "<!-- excerpt: FILE -->" must appear in FILE word for word, and each example has some.
"$python" - clients <<'EOF'
import pathlib, re, sys
clients = pathlib.Path(sys.argv[1])
blocks = re.findall(r"<!-- excerpt: (\S+) -->\n```\w*\n(.*?)```", (clients / "README.md").read_text(), re.S)
stale = sorted({name for name, code in blocks if code not in (clients / name).read_text()})
missing = sorted({"go/example/main.go", "ts/example.ts", "python/example.py"} - {name for name, _ in blocks})
if stale or missing:
    sys.exit("client-smoke: clients/README.md " + "; ".join(
        [f"no longer matches {name}: copy the changed lines into its excerpt" for name in stale]
        + [f"shows nothing of {name}" for name in missing]))
EOF

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
go build -o "$tmp/testagent" ./internal/testagent
# With agenticd's flags: the packages it shares with agenticd are already built so.
go build "${build_flags[@]}" -o "$tmp/example-go" ./clients/go/example

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

# The examples are documentation (clients/README.md): each runs one turn in a workspace
# of its own and must print exactly the assistant's reply (the user's message, which
# streams first under its own id, must not show), say on stderr that it chose the
# allow-once option, and exit 0. The agent (clients/testdata/acp-turn.json) says which
# option it got ("permission: <kind> <option id>") and writes notes.txt once allowed.
example_message="Say hello, then edit notes.txt."
example_reply="Hello from the scripted agent. I would like to edit notes.txt.permission: allow_once allowwrite ok"
example_choice='permission "Edit notes.txt": chose "Allow"'
run_example() {
	local name=$1
	shift
	local dir="$workspace_root/example-$name" status=0 problems=()
	mkdir -p "$dir"
	echo "client-smoke: $name example"
	AGENTICD_ADDR=$addr timeout -k 5 "$client_timeout" "$@" --agent "$turn_agent" --workspace "$dir" \
		--message "$example_message" >"$tmp/example-$name.out" 2>"$tmp/example-$name.err" || status=$?
	((status == 0)) || problems+=("exit status $status, want 0")
	[[ $(<"$tmp/example-$name.out") == "$example_reply" ]] || problems+=("stdout is not exactly the reply \"$example_reply\"")
	grep -qF "$example_choice" "$tmp/example-$name.err" || problems+=("stderr lacks '$example_choice'")
	grep -qs "after the client allowed it" "$dir/notes.txt" || problems+=("the agent did not write notes.txt: the permission was not allowed")
	if ((${#problems[@]} > 0)); then
		printf 'client-smoke: %s example failed:\n' "$name" >&2
		printf '  - %s\n' "${problems[@]}" >&2
		printf -- '--- stdout ---\n%s\n--- stderr ---\n%s\n' "$(<"$tmp/example-$name.out")" "$(<"$tmp/example-$name.err")" >&2
		failed+=("$name example")
		return
	fi
	echo "ok   $name example: printed the reply, chose allow once"
}

run_example go "$tmp/example-go"

# The TypeScript example imports the generated code as the package gen/ts is: give it a
# project of its own whose node_modules links that package and the repository's runtime.
ts_project="$tmp/ts-example"
mkdir -p "$ts_project/node_modules/@agenticd"
echo '{"type": "module"}' >"$ts_project/package.json"
ln -s "$PWD/gen/ts" "$ts_project/node_modules/@agenticd/api"
ln -s "$PWD/node_modules/@bufbuild" "$PWD/node_modules/@connectrpc" "$ts_project/node_modules/"
cp clients/ts/example.ts "$ts_project/"
run_example typescript "$tsx" "$ts_project/example.ts"

# The Python example imports agentic.v1 as `pip install ./gen/python` installs it.
PYTHONPATH="$PWD/gen/python/src" PYTHONDONTWRITEBYTECODE=1 run_example python "$python" clients/python/example.py

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
echo "client-smoke: both clients and the three examples passed"
