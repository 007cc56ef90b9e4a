// A small agenticd client: creates a session, subscribes to its events, sends one
// message, prints the assistant's reply as it streams and allows once whatever tool
// the agent asks permission for.
//
//   npx tsx example.ts --workspace ~/src/project --agent deepchat.default \
//       --message 'Say hello' [--addr 127.0.0.1:50051] [--token T]
import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import type { Client, Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ErrorReason } from "@agenticd/api/agentic/v1/errors_pb";
import type { AgenticEvent } from "@agenticd/api/agentic/v1/events_pb";
import { AgenticService } from "@agenticd/api/agentic/v1/service_pb";
import type { SubscribeResponse } from "@agenticd/api/agentic/v1/service_pb";
import { PermissionOptionKind, StopReason } from "@agenticd/api/agentic/v1/types_pb";
import type { PermissionRequest } from "@agenticd/api/agentic/v1/types_pb";
import { BadRequestSchema, ErrorInfoSchema } from "@agenticd/api/google/rpc/error_details_pb";

type AgenticClient = Client<typeof AgenticService>;

async function main(): Promise<void> {
  const { values: opts } = parseArgs({
    options: {
      addr: { type: "string", default: process.env.AGENTICD_ADDR ?? "127.0.0.1:50051" },
      token: { type: "string", default: (process.env.AGENTICD_TOKEN ?? "").trim() },
      agent: { type: "string", default: "deepchat.default" },
      workspace: { type: "string", default: "" },
      message: { type: "string", default: "Hello! What can you do?" },
    },
  });
  if (opts.workspace === "") {
    throw new Error("--workspace is required: an absolute directory under one of the server's workspace_roots");
  }
  const bearer: Interceptor = (next) => (req) => {
    req.header.set("authorization", `Bearer ${opts.token}`);
    return next(req);
  };
  const transport = createGrpcTransport({
    baseUrl: `http://${opts.addr}`,
    interceptors: opts.token !== "" ? [bearer] : [],
  });
  const client = createClient(AgenticService, transport);

  // A request_id makes a retry safe: a repeat gets the first call's answer.
  const { session } = await client.createSession({
    agentId: opts.agent,
    config: { workspace: opts.workspace },
    requestId: randomUUID(),
  });
  const sessionId = session?.sessionId ?? "";
  // Subscribe from the session's last_sequence: the server replays what came after
  // it, so the stream holds every event of the turn however the calls race.
  const abort = new AbortController();
  const frames = client.subscribe(
    { sessionIds: [sessionId], start: { case: "afterSequence", value: session?.lastSequence ?? 0n } },
    { signal: abort.signal },
  );
  try {
    // The reply's id, chosen here: every event of the turn can be matched from the first.
    const messageId = randomUUID();
    await client.sendMessage({
      sessionId,
      content: { parts: [{ part: { case: "text", value: opts.message } }] },
      requestId: randomUUID(),
      messageId,
    });
    await printReply(client, sessionId, events(frames), messageId);
  } finally {
    abort.abort();
    await client.closeSession({ sessionId });
  }
}

// The events of a Subscribe stream, which come in batches; bookmarks, the caught-up
// marker and heartbeats carry none and matter only to a client that resumes streams.
async function* events(frames: AsyncIterable<SubscribeResponse>): AsyncGenerator<AgenticEvent> {
  for await (const { frame } of frames) {
    if (frame.case === "events") {
      yield* frame.value.events;
    }
  }
}

async function printReply(client: AgenticClient, sessionId: string, events: AsyncIterable<AgenticEvent>, messageId: string) {
  for await (const event of events) {
    const { case: kind, value } = event.payload;
    if (kind === "messageDelta" && value.messageId === messageId) {
      // The user's message streams too, under its own id: print only the reply.
      process.stdout.write(value.text);
    } else if (kind === "toolPermissionRequired" && value.request) {
      await allowOnce(client, sessionId, value.request);
    } else if (kind === "error") {
      console.error(`agent error ${ErrorReason[value.reason]}: ${value.message}`);
    } else if (kind === "messageEnd" && value.messageId === messageId) {
      process.stdout.write("\n");
      if (value.stopReason !== StopReason.END_TURN) {
        throw new Error(`the turn ended with ${StopReason[value.stopReason]}`);
      }
      return;
    }
  }
  throw new Error("the event stream ended before the reply did");
}

// Answers a permission request with its allow-once option.
async function allowOnce(client: AgenticClient, sessionId: string, req: PermissionRequest) {
  const option = req.options.find((o) => o.kind === PermissionOptionKind.ALLOW_ONCE);
  if (!option) {
    console.error(`permission "${req.description}": no allow-once option; left unanswered`);
    return;
  }
  console.error(`permission "${req.description}": chose "${option.name}"`);
  await client.respondPermission({
    sessionId,
    permissionId: req.permissionId,
    answer: { case: "optionId", value: option.optionId },
    requestId: randomUUID(),
  });
}

// A failed call as one line, with agenticd's ErrorInfo reason (e.g. "SESSION_BUSY"): what
// a program acts on, where the message is for people; and the fields BadRequest names.
function describe(err: unknown): string {
  if (!(err instanceof ConnectError)) {
    return err instanceof Error ? err.message : String(err);
  }
  const reason = err.findDetails(ErrorInfoSchema).find((info) => info.domain === "agenticd")?.reason;
  const fields = err.findDetails(BadRequestSchema).flatMap((bad) => bad.fieldViolations);
  return [`${Code[err.code]}${reason ? ` ${reason}` : ""}: ${err.rawMessage}`,
    ...fields.map((v) => `${v.field}: ${v.description}`)].join("; ");
}

main().catch((err: unknown) => {
  console.error(`example: ${describe(err)}`);
  process.exitCode = 1;
});
