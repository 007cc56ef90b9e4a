"""A smoke test of agenticd's gRPC API from Python, through the generated gen/python
code and grpcio: what a Python frontend does first.

    /usr/bin/python3 clients/python/smoke.py --addr 127.0.0.1:50051 \\
        --workspace /abs/dir/under/a/root [--agent deepchat.default] [--turn-agent ID] \\
        [--token T] [--timeout 30]

--turn-agent names an agent whose turn asks one permission (the ACP scripted test
agent): the program then runs a whole turn on it, answering the permission.
Exits 0 when every step passed, 1 with the failing step's reason otherwise.
Runs on Debian's python3-grpcio and python3-protobuf (/usr/bin/python3).
"""

import argparse
import collections
import os
import pathlib
import queue
import sys
import threading
import time
import uuid

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "gen" / "python" / "src"))

import grpc  # noqa: E402
from google.rpc import error_details_pb2, status_pb2  # noqa: E402

from agentic.v1 import errors_pb2, events_pb2, service_pb2, service_pb2_grpc, types_pb2  # noqa: E402

import health  # noqa: E402


class StepFailure(Exception):
    pass


def fail(message):
    raise StepFailure(message)


class EventReader:
    """Reads one Subscribe stream on a thread of its own as a flat sequence of events,
    keeping count of its frames, so that every wait is bounded: a missing event fails
    the step instead of hanging the program. close() cancels the call, which ends the
    thread."""

    _END = object()

    def __init__(self, stub, after_sequence, timeout, metadata):
        self._timeout = timeout
        self._last_sequence = 0
        self._frames = queue.Queue()
        self._pending = collections.deque()
        self.caught_up_at = None  # the caught_up frame's sequence, once it came
        self.replayed = 0  # events before the caught_up frame
        self.events = 0
        self.batches = 0
        self._call = stub.Subscribe(
            service_pb2.SubscribeRequest(after_sequence=after_sequence), metadata=metadata
        )
        self._thread = threading.Thread(target=self._read, name="subscribe-reader", daemon=True)
        self._thread.start()

    def _read(self):
        try:
            for frame in self._call:
                self._frames.put(frame)
            self._frames.put(self._END)
        except grpc.RpcError as err:
            self._frames.put(err)

    def wait_for_caught_up(self):
        """Reads frames until one says the replay is over; returns its sequence."""
        deadline = time.monotonic() + self._timeout
        while self.caught_up_at is None:
            self._read_frame("the caught_up frame", deadline)
        return self.caught_up_at

    def wait_for(self, what, matches):
        """Returns the first event that matches."""
        deadline = time.monotonic() + self._timeout
        while True:
            if not self._pending:
                self._read_frame(what, deadline)
                continue
            event = self._pending.popleft()
            if matches(event):
                return event

    def _read_frame(self, what, deadline):
        try:
            item = self._frames.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            fail(f"no {what} within {self._timeout} s")
        if item is self._END:
            fail(f"Subscribe stream ended while waiting for {what}")
        if isinstance(item, grpc.RpcError):
            fail(f"Subscribe stream failed while waiting for {what}: {item.code().name}: {item.details()}")
        kind = item.WhichOneof("frame")
        if kind == "events":
            if not item.events.events:
                fail("an events frame holds no event")
            self.batches += 1
            for event in item.events.events:
                if event.sequence <= self._last_sequence:
                    fail(f"event sequence went from {self._last_sequence} to {event.sequence}; it must rise")
                self._last_sequence = event.sequence
                self.events += 1
                if self.caught_up_at is None:
                    self.replayed += 1
                self._pending.append(event)
        elif kind == "caught_up":
            if self.caught_up_at is not None:
                fail("a second caught_up frame")
            if item.caught_up.sequence < self._last_sequence:
                fail(f"caught_up at {item.caught_up.sequence}, before the replayed event {self._last_sequence}")
            self.caught_up_at = item.caught_up.sequence
        elif kind not in ("bookmark", "heartbeat"):
            fail(f"a frame of no known kind ({kind})")

    def close(self):
        self._call.cancel()
        self._thread.join()


def error_info_reason(err):
    """The reason of agenticd's google.rpc.ErrorInfo in a failed call's
    grpc-status-details-bin trailer ("" when there is none)."""
    trailer = dict(err.trailing_metadata() or ()).get("grpc-status-details-bin", b"")
    for detail in status_pb2.Status.FromString(trailer).details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info) and info.domain == "agenticd":
            return info.reason
    return ""


def event_name(event_type):
    return events_pb2.AgenticEventType.Name(event_type)


def run(opts):
    metadata = (("authorization", f"Bearer {opts.token}"),) if opts.token else ()
    channel = grpc.insecure_channel(opts.addr)
    try:
        agentic = service_pb2_grpc.AgenticServiceStub(channel)
        health_stub = health.HealthStub(channel)
        call = {"timeout": opts.timeout, "metadata": metadata}

        def step(name, body):
            try:
                detail = body()
            except grpc.RpcError as err:
                fail(f"{name}: {err.code().name}: {err.details()}")
            except StepFailure as err:
                fail(f"{name}: {err}")
            print(f"ok   {name}: {detail}", flush=True)

        def check_health():
            res = health_stub.Check(health.HealthCheckRequest(service=""), wait_for_ready=True, **call)
            if res.status != health.SERVING:
                fail(f"status is {health.status_name(res.status)}, want SERVING")
            return "SERVING"

        step("health check", check_health)

        def list_agents():
            ids = [a.agent_id for a in agentic.ListAgents(service_pb2.ListAgentsRequest(), **call).agents]
            for want in filter(None, (opts.agent, opts.turn_agent)):
                if want not in ids:
                    fail(f"agent {want} is not listed (listed: {', '.join(ids) or 'none'})")
            return ", ".join(ids)

        step("ListAgents", list_agents)

        def send_to_unknown_session():
            unknown_id = f"no-such-session-{os.getpid()}-{time.time_ns()}"
            try:
                res = agentic.SendMessage(
                    service_pb2.SendMessageRequest(
                        session_id=unknown_id, content=text_content("hello?"), request_id=str(uuid.uuid4())),
                    **call,
                )
            except grpc.RpcError as err:
                if err.code() != grpc.StatusCode.NOT_FOUND:
                    fail(f"code {err.code().name} ({err.details()}), want NOT_FOUND")
                if unknown_id not in (err.details() or ""):
                    fail(f'message "{err.details()}" does not name the session id {unknown_id}')
                reason = error_info_reason(err)
                if reason != "SESSION_NOT_FOUND":
                    fail(f'ErrorInfo reason "{reason}", want SESSION_NOT_FOUND')
                return f"NOT_FOUND {reason}: {err.details()}"
            fail(f"got message {res.message_id}, want NOT_FOUND")

        step("SendMessage to an unknown session fails with NOT_FOUND, reason SESSION_NOT_FOUND",
             send_to_unknown_session)

        def create_session(agent_id, title):
            res = agentic.CreateSession(
                service_pb2.CreateSessionRequest(
                    agent_id=agent_id,
                    config=service_pb2.SessionConfig(workspace=opts.workspace, title=title),
                    request_id=str(uuid.uuid4()),
                ),
                **call,
            )
            if not res.session.session_id:
                fail("CreateSession returned no session id")
            return res.session.session_id

        # Subscribe after a sequence the server already emitted, so the stream holds every
        # later event however the Subscribe and CreateSession calls race on the server.
        anchor = {}

        def create_anchor():
            session_id = create_session(opts.agent, "python smoke anchor")
            got = agentic.GetSession(service_pb2.GetSessionRequest(session_id=session_id), **call)
            anchor["sequence"] = got.session.last_sequence
            if anchor["sequence"] == 0:
                fail(f"session {session_id} has last_sequence 0 after it was created; want its SESSION_CREATED sequence")
            return f"session {session_id}, last_sequence {anchor['sequence']}"

        step("CreateSession gives a sequence to resume from", create_anchor)

        events = EventReader(agentic, anchor["sequence"], opts.timeout, metadata)
        try:
            def see_caught_up():
                at = events.wait_for_caught_up()
                if at < anchor["sequence"]:
                    fail(f"caught_up at {at}, before the resume point {anchor['sequence']}")
                return f"caught_up at {at} after {events.replayed} replayed events"

            step("Subscribe ends its replay with caught_up", see_caught_up)

            def see_session_created():
                session_id = create_session(opts.agent, "python smoke")
                event = events.wait_for(f"SESSION_CREATED for {session_id}", lambda e: e.session_id == session_id)
                if event.type != events_pb2.AGENTIC_EVENT_TYPE_SESSION_CREATED or event.WhichOneof("payload") != "session_created":
                    fail(f"first event of {session_id} is {event_name(event.type)} ({event.WhichOneof('payload')}), want SESSION_CREATED")
                if event.session_created.session.workspace != opts.workspace:
                    fail(f"SESSION_CREATED workspace is {event.session_created.session.workspace}, want {opts.workspace}")
                return f"{session_id} at sequence {event.sequence}"

            step("Subscribe delivers the SESSION_CREATED this client caused", see_session_created)

            if opts.turn_agent:
                step(f"a whole turn on {opts.turn_agent}", lambda: run_turn(agentic, events, create_session, call, opts))
            print(f"ok   Subscribe: {events.events} events in {events.batches} batches", flush=True)
        finally:
            events.close()
    finally:
        channel.close()


def text_content(text):
    return types_pb2.MessageContent(parts=[types_pb2.ContentPart(text=text)])


def run_turn(agentic, events, create_session, call, opts):
    """One turn: send, stream deltas, answer the permission request, see MESSAGE_END."""
    session_id = create_session(opts.turn_agent, "python smoke turn")
    # The reply's id is chosen here, so the turn's events are known from the first.
    message_id = f"python-smoke-{uuid.uuid4()}"
    sent = agentic.SendMessage(
        service_pb2.SendMessageRequest(
            session_id=session_id,
            content=text_content("Say hello, then edit a file (smoke test from the Python client)."),
            request_id=str(uuid.uuid4()),
            message_id=message_id,
        ),
        **call,
    )
    if sent.message_id != message_id:
        fail(f"SendMessage answered message_id {sent.message_id}, want the chosen {message_id}")

    deltas = granted = 0
    pending_request = ""
    while True:
        event = events.wait_for(f"the events of turn {message_id}", lambda e: e.session_id == session_id)
        kind = event.WhichOneof("payload")
        if kind == "message_delta":
            if event.message_delta.message_id == message_id and event.message_delta.text:
                deltas += 1
        elif kind == "tool_permission_required":
            request = event.tool_permission_required.request
            if not any(o.kind == types_pb2.PERMISSION_OPTION_KIND_ALLOW_ONCE for o in request.options):
                fail(f"permission request {request.permission_id} offers no ALLOW_ONCE option")
            pending_request = request.permission_id
            agentic.RespondPermission(
                service_pb2.RespondPermissionRequest(
                    session_id=session_id,
                    permission_id=request.permission_id,
                    option_kind=types_pb2.PERMISSION_OPTION_KIND_ALLOW_ONCE,
                    request_id=str(uuid.uuid4()),
                ),
                **call,
            )
        elif kind == "tool_permission_granted":
            if event.tool_permission_granted.permission_id == pending_request:
                granted += 1
        elif kind == "tool_permission_denied":
            denied = event.tool_permission_denied
            fail(f"permission {denied.permission_id} was denied: {denied.reason}")
        elif kind == "error":
            fail(f"ERROR event {errors_pb2.ErrorReason.Name(event.error.reason)}: {event.error.message}")
        elif kind == "message_end" and event.message_end.message_id == message_id:
            end = event.message_end
            if end.stop_reason != types_pb2.STOP_REASON_END_TURN:
                fail(f"turn ended with {types_pb2.StopReason.Name(end.stop_reason)}, want STOP_REASON_END_TURN")
            if deltas == 0:
                fail("turn ended without a MESSAGE_DELTA")
            if not pending_request:
                fail("turn ended without a TOOL_PERMISSION_REQUIRED")
            if granted == 0:
                fail(f"turn ended without TOOL_PERMISSION_GRANTED for {pending_request}")
            return f"{deltas} deltas, permission {pending_request} granted, MESSAGE_END(END_TURN)"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--addr", default="127.0.0.1:50051")
    parser.add_argument("--workspace", required=True,
                        help="absolute directory under one of the server's workspace_roots")
    parser.add_argument("--agent", default="deepchat.default")
    parser.add_argument("--turn-agent", default="")
    parser.add_argument("--token", default=os.environ.get("AGENTICD_TOKEN", "").strip())
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds any one wait may take")
    opts = parser.parse_args()
    try:
        run(opts)
    except StepFailure as err:
        print(f"FAIL {err}", file=sys.stderr)
        return 1
    print("python smoke: all steps passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
