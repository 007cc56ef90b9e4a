#!/usr/bin/env bash
# Installs the TypeScript, Python and Go packages the way clients/README.md tells a
# stranger to, outside this repository, and uses them: a check that they install at
# all, with their dependencies, and that a program can import, compile against and run
# them. Works in a temporary directory; leaves the working tree untouched.
#
# TypeScript: `npm pack` gen/ts, then in a fresh project the README's two commands in
# order (the tarball, then @connectrpc/connect-node from the npm registry), then tsc and
# node on a small program. The second install is part of the check: installing a path
# made npm turn the package back into a symlink, whose imports then missed
# @bufbuild/protobuf.
# Go: a program in a module of its own, at gen/go's go version, that requires gen/go (a
# copy, through a replace, as an unpublished module must be): building it must not raise
# its go line, i.e. the API module asks for no newer Go than it says.
# Python: a fresh virtual environment that sees Debian's grpcio and protobuf (PyPI is
# not reachable here), pip with --no-index, then an import and an ErrorInfo round trip.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
python=/usr/bin/python3 # Debian's python3-grpcio and python3-protobuf live here
tsc=$repo/node_modules/.bin/tsc

tmp=$(mktemp -d "${TMPDIR:-/tmp}/agenticd-packages.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# --prefer-offline: the npm cache answers when it can; the registry only when it cannot.
quiet=(--no-audit --no-fund --loglevel=error --prefer-offline)

# A private package cannot be published, and one without a licence may not be used.
node -e 'const p = require("./gen/ts/package.json"); if (p.private || p.license !== "Apache-2.0") { console.error("package-check: gen/ts/package.json must not be private and must say license Apache-2.0"); process.exit(1); }'

echo "package-check: TypeScript: npm pack gen/ts, install the tarball in a fresh project"
tarball=$(npm pack ./gen/ts --pack-destination "$tmp" --silent "${quiet[@]}" | tail -n 1)
mkdir "$tmp/ts"
cd "$tmp/ts"
echo '{"name": "stranger", "private": true, "type": "module"}' >package.json
npm install "${quiet[@]}" "$tmp/$tarball" >/dev/null
npm install "${quiet[@]}" @connectrpc/connect-node@^2.1.2 >/dev/null
if [[ -L node_modules/@agenticd/api ]]; then
	echo "package-check: npm installed @agenticd/api as a symlink, not a copy" >&2
	exit 1
fi
cat >tsconfig.json <<'EOF'
{
  "compilerOptions": {
    "module": "nodenext",
    "target": "es2022",
    "strict": true,
    "skipLibCheck": true,
    "outDir": "dist"
  },
  "files": ["check.ts"]
}
EOF
cat >check.ts <<'EOF'
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AgenticService, SendMessageRequestSchema } from "@agenticd/api/agentic/v1/service_pb";
import { BadRequestSchema, ErrorInfoSchema } from "@agenticd/api/google/rpc/error_details_pb";

const client = createClient(AgenticService, createGrpcTransport({ baseUrl: "http://127.0.0.1:1" }));
if (typeof client.sendMessage !== "function") throw new Error("no sendMessage on the client");
const request = create(SendMessageRequestSchema, { sessionId: "s1", messageId: "m1" });
if (fromBinary(SendMessageRequestSchema, toBinary(SendMessageRequestSchema, request)).messageId !== "m1") {
  throw new Error("SendMessageRequest did not survive a round trip");
}
// An error with details as agenticd sends them, read back as messages.
const err = new ConnectError("bad", Code.InvalidArgument, undefined, [
  { desc: ErrorInfoSchema, value: { reason: "INVALID_ARGUMENT", domain: "agenticd" } },
  { desc: BadRequestSchema, value: { fieldViolations: [{ field: "message_id", description: "too long" }] } },
]);
const [info] = err.findDetails(ErrorInfoSchema);
const [bad] = err.findDetails(BadRequestSchema);
if (info?.reason !== "INVALID_ARGUMENT" || bad?.fieldViolations[0]?.field !== "message_id") {
  throw new Error("error details not readable");
}
console.log("ok");
EOF
"$tsc" -p tsconfig.json
[[ $(node dist/check.js) == ok ]]
echo "ok   TypeScript: $tarball installs from its tarball, compiles and runs"
cd "$repo"

echo "package-check: Python: pip install gen/python into a fresh virtual environment"
# pip builds in the source directory (build/, *.egg-info): build a copy.
cp -r gen/python "$tmp/python-src"
"$python" -m venv --system-site-packages --without-pip "$tmp/venv"
"$python" -m pip --python "$tmp/venv/bin/python" install -q --no-index --no-build-isolation "$tmp/python-src"
(cd "$tmp" && PYTHONDONTWRITEBYTECODE=1 "$tmp/venv/bin/python" - <<'EOF'
import importlib.metadata
from agentic.v1 import service_pb2, service_pb2_grpc
from google.rpc import error_details_pb2, status_pb2

assert "/venv/" in service_pb2.__file__, service_pb2.__file__
assert service_pb2_grpc.AgenticServiceStub
# A grpc-status-details-bin trailer as agenticd sends it, read back as messages.
status = status_pb2.Status(code=3, message="bad")
status.details.add().Pack(error_details_pb2.ErrorInfo(reason="INVALID_ARGUMENT", domain="agenticd"))
status = status_pb2.Status.FromString(status.SerializeToString())
info = error_details_pb2.ErrorInfo()
assert status.details[0].Unpack(info) and info.reason == "INVALID_ARGUMENT"
assert importlib.metadata.metadata("agenticd-api")["License"] == "Apache-2.0"
EOF
)
echo "ok   Python: agenticd-api installs with pip into a virtual environment and imports"

echo "package-check: Go: build a program against gen/go in a module at gen/go's go version"
go_line=$(sed -n 's/^go //p' gen/go/go.mod)
# Its go line must be no higher than its direct requirements' go lines ask: a
# `go mod tidy` after raising a requirement raises it silently.
needed=0
for req in $(cd gen/go && go list -m -f '{{if not .Indirect}}{{if not .Main}}{{.Path}}@{{.Version}}{{end}}{{end}}' all); do
	gomod=$(cd gen/go && go mod download -json "$req" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
	needed=$(printf '%s\n%s\n' "$needed" "$(sed -n 's/^go //p' "$gomod")" | sort -V | tail -n 1)
done
if [[ $go_line != "$needed" ]]; then
	echo "package-check: gen/go/go.mod says go $go_line, its requirements need go $needed: set that" >&2
	exit 1
fi
cp -r gen/go "$tmp/go-api"
mkdir "$tmp/go-program"
cat >"$tmp/go-program/go.mod" <<EOF
module example.com/stranger

go $go_line

require github.com/agenticd/agenticd/gen/go v0.0.0

replace github.com/agenticd/agenticd/gen/go => $tmp/go-api
EOF
cat >"$tmp/go-program/main.go" <<'EOF'
package main

import (
	"fmt"

	agenticv1 "github.com/agenticd/agenticd/gen/go/agentic/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

func main() {
	var conn grpc.ClientConnInterface
	_ = agenticv1.NewAgenticServiceClient(conn)
	b, err := proto.Marshal(&agenticv1.SendMessageRequest{SessionId: "s1", MessageId: "m1"})
	var back agenticv1.SendMessageRequest
	if err == nil {
		err = proto.Unmarshal(b, &back)
	}
	if err != nil || back.GetMessageId() != "m1" {
		panic(fmt.Sprint("SendMessageRequest did not survive a round trip: ", err))
	}
	fmt.Println("ok")
}
EOF
# The program's go.sum is its own: let go write it (only the Go proxy is asked).
(cd "$tmp/go-program" && GOFLAGS=-mod=mod GOTOOLCHAIN=local go mod tidy && GOTOOLCHAIN=local go run .) >"$tmp/go.out"
if [[ $(<"$tmp/go.out") != ok ]] || ! grep -qx "go $go_line" "$tmp/go-program/go.mod"; then
	echo "package-check: the Go program failed, or its go line moved past go $go_line:" >&2
	cat "$tmp/go.out" "$tmp/go-program/go.mod" >&2
	exit 1
fi
echo "ok   Go: gen/go builds into a go $go_line module without raising its go line"
