"""A small agenticd client: creates a session, subscribes to its events, sends one
message, prints the assistant's reply as it streams and allows once whatever tool
the agent asks permission for.

    python3 example.py --workspace ~/src/project --agent deepchat.default \\
        --message 'Say hello' [--addr 127.0.0.1:50051] [--token T]
"""

import argparse
import os
import sys
import uuid

import grpc
from agentic.v1 import errors_pb2, service_pb2, service_pb2_grpc, types_pb2
from google.rpc import error_details_pb2, status_pb2


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--addr", default=os.environ.get("AGENTICD_ADDR", "127.0.0.1:50051"))
    parser.add_argument("--token", default=os.environ.get("AGENTICD_TOKEN", "").strip())
    parser.add_argument("--agent", default="deepchat.default")
    parser.add_argument("--workspace", required=True,
                        help="an absolute directory under one of the server's workspace_roots")
    parser.add_argument("--message", default="Hello! What can you do?")
    opts = parser.parse_args()
    metadata = [("authorization", f"Bearer {opts.token}")] if opts.token else []

    with grpc.insecure_channel(opts.addr) as channel:
        client = service_pb2_grpc.AgenticServiceStub(channel)
        # A request_id makes a retry safe: a repeat gets the first call's answer.
        session = client.CreateSession(
            service_pb2.CreateSessionRequest(
                agent_id=opts.agent, config=service_pb2.SessionConfig(workspace=opts.workspace),
                request_id=str(uuid.uuid4())),
            metadata=metadata,
        ).session
        # Subscribe from the session's last_sequence: the server replays what came after
        # it, so the stream holds every event of the turn however the calls race.
        frames = client.Subscribe(
            service_pb2.SubscribeRequest(
                session_ids=[session.session_id], after_sequence=session.last_sequence),
            metadata=metadata,
        )
        try:
            # The reply's id, chosen here: every event of the turn can be matched from the first.
            message_id = str(uuid.uuid4())
            client.SendMessage(
                service_pb2.SendMessageRequest(
                    session_id=session.session_id,
                    content=types_pb2.MessageContent(parts=[types_pb2.ContentPart(text=opts.message)]),
                    request_id=str(uuid.uuid4()), message_id=message_id),
                metadata=metadata,
            )
            print_reply(client, session.session_id, events(frames), message_id, metadata)
        finally:
            frames.cancel()
            client.CloseSession(service_pb2.CloseSessionRequest(session_id=session.session_id),
                                metadata=metadata)


def events(frames):
    """The events of a Subscribe stream, which come in batches; bookmarks, the caught-up
    marker and heartbeats carry none and matter only to a client that resumes streams."""
    for frame in frames:
        yield from frame.events.events


def print_reply(client, session_id, events, message_id, metadata):
    for event in events:
        kind = event.WhichOneof("payload")
        if kind == "message_delta" and event.message_delta.message_id == message_id:
            # The user's message streams too, under its own id: print only the reply.
            print(event.message_delta.text, end="", flush=True)
        elif kind == "tool_permission_required":
            allow_once(client, session_id, event.tool_permission_required.request, metadata)
        elif kind == "error":
            print(f"agent error {errors_pb2.ErrorReason.Name(event.error.reason)}: {event.error.message}",
                  file=sys.stderr)
        elif kind == "message_end" and event.message_end.message_id == message_id:
            print()
            if event.message_end.stop_reason != types_pb2.STOP_REASON_END_TURN:
                sys.exit(f"the turn ended with {types_pb2.StopReason.Name(event.message_end.stop_reason)}")
            return
    sys.exit("the event stream ended before the reply did")


def allow_once(client, session_id, request, metadata):
    """Answers a permission request with its allow-once option."""
    option = next((o for o in request.options
                   if o.kind == types_pb2.PERMISSION_OPTION_KIND_ALLOW_ONCE), None)
    if option is None:
        print(f'permission "{request.description}": no allow-once option; left unanswered', file=sys.stderr)
        return
    print(f'permission "{request.description}": chose "{option.name}"', file=sys.stderr)
    client.RespondPermission(
        service_pb2.RespondPermissionRequest(
            session_id=session_id, permission_id=request.permission_id, option_id=option.option_id,
            request_id=str(uuid.uuid4())),
        metadata=metadata,
    )


def describe(err):
    """A failed call as one line, with agenticd's ErrorInfo reason (e.g. "SESSION_BUSY"):
    what a program acts on, where the message is for people; and the fields BadRequest
    names. The details travel in the grpc-status-details-bin trailer, a google.rpc.Status."""
    trailer = dict(err.trailing_metadata() or ()).get("grpc-status-details-bin", b"")
    head, fields = f"{err.code().name}: {err.details()}", []
    for detail in status_pb2.Status.FromString(trailer).details:
        info, bad = error_details_pb2.ErrorInfo(), error_details_pb2.BadRequest()
        if detail.Unpack(info) and info.domain == "agenticd":
            head = f"{err.code().name} {info.reason}: {err.details()}"
        elif detail.Unpack(bad):
            fields += [f"{v.field}: {v.description}" for v in bad.field_violations]
    return "; ".join([head, *fields])


if __name__ == "__main__":
    try:
        main()
    except grpc.RpcError as err:
        sys.exit(f"example: {describe(err)}")
