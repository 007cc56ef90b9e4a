// A smoke test of agenticd's gRPC API from TypeScript, through the generated gen/ts
// code and connect's gRPC transport: what a TypeScript frontend does first.
//
//   npx tsx clients/ts/smoke.ts --addr 127.0.0.1:50051 --workspace /abs/dir/under/a/root
//       [--agent deepchat.default] [--turn-agent ID] [--token T] [--timeout 30]
//
// --turn-agent names an agent whose turn asks one permission (the ACP scripted test
// agent): the program then runs a whole turn on it, answering the permission.
// Exits 0 when every step passed, 1 with the failing step's reason otherwise.
import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import type { Client, Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AgenticService } from "../../gen/ts/src/agentic/v1/service_pb.js";
import { ErrorInfoSchema } from "../../gen/ts/src/google/rpc/error_details_pb.js";
import type { SubscribeResponse } from "../../gen/ts/src/agentic/v1/service_pb.js";
import type { AgenticEvent } from "../../gen/ts/src/agentic/v1/events_pb.js";
import { AgenticEventType } from "../../gen/ts/src/agentic/v1/events_pb.js";
import { PermissionOptionKind, StopReason } from "../../gen/ts/src/agentic/v1/types_pb.js";
import { ErrorReason } from "../../gen/ts/src/agentic/v1/errors_pb.js";
import { Health, HealthCheckResponse_ServingStatus } from "./health.js";

class StepFailure extends Error {}

function fail(message: string): never {
  throw new StepFailure(message);
}

interface Options {
  addr: string;
  workspace: string;
  agent: string;
  turnAgent: string;
  token: string;
  timeoutMs: number;
}

function parseOptions(): Options {
  const { values } = parseArgs({
    options: {
      addr: { type: "string", default: "127.0.0.1:50051" },
      workspace: { type: "string" },
      agent: { type: "string", default: "deepchat.default" },
      "turn-agent": { type: "string", default: "" },
      token: { type: "string", default: (process.env.AGENTICD_TOKEN ?? "").trim() },
      timeout: { type: "string", default: "30" },
    },
    strict: true,
  });
  if (!values.workspace) {
    fail("--workspace is required: an absolute directory under one of the server's workspace_roots");
  }
  const timeoutSeconds = Number(values.timeout);
  if (!(timeoutSeconds > 0)) {
    fail(`--timeout ${values.timeout} is not a positive number of seconds`);
  }
  return {
    addr: values.addr,
    workspace: values.workspace,
    agent: values.agent,
    turnAgent: values["turn-agent"],
    token: values.token,
    timeoutMs: timeoutSeconds * 1000,
  };
}

// Reads one Subscribe stream as a flat sequence of events, keeping count of its frames;
// every wait is bounded so that a missing event fails the step instead of hanging the
// program.
class EventReader {
  private readonly abort = new AbortController();
  private readonly frames: AsyncIterator<SubscribeResponse>;
  private pending: AgenticEvent[] = [];
  private lastSequence = 0n;
  // The caught_up frame's sequence, once it came.
  caughtUpAt: bigint | undefined;
  // Events seen before the caught_up frame (the replay).
  replayed = 0;
  events = 0;
  batches = 0;

  constructor(
    agentic: Client<typeof AgenticService>,
    afterSequence: bigint,
    private readonly timeoutMs: number,
  ) {
    this.frames = agentic
      .subscribe({ start: { case: "afterSequence", value: afterSequence } }, { signal: this.abort.signal })
      [Symbol.asyncIterator]();
  }

  // Reads frames until one says the replay is over; fails after timeoutMs.
  async waitForCaughtUp(): Promise<bigint> {
    return this.bounded("the caught_up frame", async () => {
      while (this.caughtUpAt === undefined) {
        await this.readFrame("the caught_up frame");
      }
      return this.caughtUpAt;
    });
  }

  // Returns the first event that matches; fails after timeoutMs or when the stream ends.
  async waitFor(what: string, matches: (event: AgenticEvent) => boolean): Promise<AgenticEvent> {
    return this.bounded(what, async () => {
      for (;;) {
        const event = this.pending.shift();
        if (event === undefined) {
          await this.readFrame(what);
        } else if (matches(event)) {
          return event;
        }
      }
    });
  }

  private async bounded<T>(what: string, wait: () => Promise<T>): Promise<T> {
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      this.abort.abort();
    }, this.timeoutMs);
    try {
      return await wait();
    } catch (err) {
      if (timedOut) {
        fail(`no ${what} within ${this.timeoutMs / 1000} s`);
      }
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  // Reads one frame: its events join the pending ones; bookmarks and heartbeats carry
  // none.
  private async readFrame(what: string): Promise<void> {
    const next = await this.frames.next();
    if (next.done) {
      fail(`Subscribe stream ended while waiting for ${what}`);
    }
    const frame = next.value.frame;
    switch (frame.case) {
      case "events":
        if (frame.value.events.length === 0) fail("an events frame holds no event");
        this.batches++;
        for (const event of frame.value.events) {
          if (event.sequence <= this.lastSequence) {
            fail(`event sequence went from ${this.lastSequence} to ${event.sequence}; it must rise`);
          }
          this.lastSequence = event.sequence;
          this.events++;
          if (this.caughtUpAt === undefined) this.replayed++;
          this.pending.push(event);
        }
        break;
      case "caughtUp":
        if (this.caughtUpAt !== undefined) fail("a second caught_up frame");
        if (frame.value.sequence < this.lastSequence) {
          fail(`caught_up at ${frame.value.sequence}, before the replayed event ${this.lastSequence}`);
        }
        this.caughtUpAt = frame.value.sequence;
        break;
      case "bookmark":
      case "heartbeat":
        break;
      default:
        fail(`a frame of no known kind (${frame.case})`);
    }
  }

  close(): void {
    this.abort.abort();
  }
}

// The reason of agenticd's google.rpc.ErrorInfo among a ConnectError's details ("" when
// there is none). connect decodes the google.rpc.Status trailer; findDetails decodes the
// details of the type asked for.
function errorInfoReason(err: ConnectError): string {
  return err.findDetails(ErrorInfoSchema).find((info) => info.domain === "agenticd")?.reason ?? "";
}

function eventName(type: AgenticEventType): string {
  return AgenticEventType[type] ?? String(type);
}

async function main(): Promise<void> {
  const opts = parseOptions();
  const interceptors: Interceptor[] = [];
  if (opts.token !== "") {
    interceptors.push((next) => async (req) => {
      req.header.set("authorization", `Bearer ${opts.token}`);
      return next(req);
    });
  }
  const transport = createGrpcTransport({ baseUrl: `http://${opts.addr}`, interceptors });
  const agentic = createClient(AgenticService, transport);
  const health = createClient(Health, transport);
  const callOpts = { timeoutMs: opts.timeoutMs };

  const step = async (name: string, run: () => Promise<string>) => {
    const detail = await run().catch((err: unknown) => {
      const reason = err instanceof ConnectError ? `${Code[err.code]}: ${err.rawMessage}` : String(err instanceof Error ? err.message : err);
      throw new StepFailure(`${name}: ${reason}`);
    });
    console.log(`ok   ${name}: ${detail}`);
  };

  await step("health check", async () => {
    const res = await health.check({ service: "" }, callOpts);
    if (res.status !== HealthCheckResponse_ServingStatus.SERVING) {
      fail(`status is ${HealthCheckResponse_ServingStatus[res.status]}, want SERVING`);
    }
    return "SERVING";
  });

  await step("ListAgents", async () => {
    const res = await agentic.listAgents({}, callOpts);
    const ids = res.agents.map((a) => a.agentId);
    for (const want of [opts.agent, opts.turnAgent].filter((id) => id !== "")) {
      if (!ids.includes(want)) {
        fail(`agent ${want} is not listed (listed: ${ids.join(", ") || "none"})`);
      }
    }
    return ids.join(", ");
  });

  await step("SendMessage to an unknown session fails with NOT_FOUND, reason SESSION_NOT_FOUND", async () => {
    const unknownId = `no-such-session-${process.pid}-${Date.now()}`;
    try {
      const res = await agentic.sendMessage(
        { sessionId: unknownId, content: { parts: [{ part: { case: "text", value: "hello?" } }] }, requestId: randomUUID() },
        callOpts,
      );
      fail(`got message ${res.messageId}, want NOT_FOUND`);
    } catch (err) {
      if (!(err instanceof ConnectError)) throw err;
      if (err.code !== Code.NotFound) {
        fail(`code ${Code[err.code]} (${err.rawMessage}), want NotFound`);
      }
      if (!err.rawMessage.includes(unknownId)) {
        fail(`message "${err.rawMessage}" does not name the session id ${unknownId}`);
      }
      const reason = errorInfoReason(err);
      if (reason !== "SESSION_NOT_FOUND") {
        fail(`ErrorInfo reason "${reason}" (details: ${err.details.map((d) => ("type" in d ? d.type : d.desc.typeName)).join(", ") || "none"}), want SESSION_NOT_FOUND`);
      }
      return `NotFound ${reason}: ${err.rawMessage}`;
    }
  });

  // Subscribe after a sequence the server already emitted, so the stream holds every
  // later event however the Subscribe and CreateSession calls race on the server.
  let anchorSequence = 0n;
  await step("CreateSession gives a sequence to resume from", async () => {
    const res = await agentic.createSession(
      { agentId: opts.agent, config: { workspace: opts.workspace, title: "ts smoke anchor" }, requestId: randomUUID() },
      callOpts,
    );
    const session = res.session ?? fail("CreateSession returned no session");
    const got = await agentic.getSession({ sessionId: session.sessionId }, callOpts);
    anchorSequence = got.session?.lastSequence ?? 0n;
    if (anchorSequence === 0n) {
      fail(`session ${session.sessionId} has last_sequence 0 after it was created; want its SESSION_CREATED sequence`);
    }
    return `session ${session.sessionId}, last_sequence ${anchorSequence}`;
  });

  const events = new EventReader(agentic, anchorSequence, opts.timeoutMs);
  try {
    await step("Subscribe ends its replay with caught_up", async () => {
      const at = await events.waitForCaughtUp();
      if (at < anchorSequence) {
        fail(`caught_up at ${at}, before the resume point ${anchorSequence}`);
      }
      return `caught_up at ${at} after ${events.replayed} replayed events`;
    });

    await step("Subscribe delivers the SESSION_CREATED this client caused", async () => {
      const res = await agentic.createSession(
        { agentId: opts.agent, config: { workspace: opts.workspace, title: "ts smoke" }, requestId: randomUUID() },
        callOpts,
      );
      const sessionId = res.session?.sessionId ?? fail("CreateSession returned no session");
      const event = await events.waitFor(`SESSION_CREATED for ${sessionId}`, (e) => e.sessionId === sessionId);
      if (event.type !== AgenticEventType.SESSION_CREATED || event.payload.case !== "sessionCreated") {
        fail(`first event of ${sessionId} is ${eventName(event.type)} (${event.payload.case}), want SESSION_CREATED`);
      }
      if (event.payload.value.session?.workspace !== opts.workspace) {
        fail(`SESSION_CREATED workspace is ${event.payload.value.session?.workspace}, want ${opts.workspace}`);
      }
      return `${sessionId} at sequence ${event.sequence}`;
    });

    if (opts.turnAgent !== "") {
      await step(`a whole turn on ${opts.turnAgent}`, () => runTurn(agentic, events, opts));
    }
    console.log(`ok   Subscribe: ${events.events} events in ${events.batches} batches`);
  } finally {
    events.close();
  }
}

// One turn: send, stream deltas, answer the permission request, see MESSAGE_END.
async function runTurn(agentic: Client<typeof AgenticService>, events: EventReader, opts: Options): Promise<string> {
  const callOpts = { timeoutMs: opts.timeoutMs };
  const created = await agentic.createSession(
    { agentId: opts.turnAgent, config: { workspace: opts.workspace, title: "ts smoke turn" }, requestId: randomUUID() },
    callOpts,
  );
  const sessionId = created.session?.sessionId ?? fail("CreateSession returned no session");
  // The reply's id is chosen here, so the turn's events are known from the first.
  const messageId = `ts-smoke-${randomUUID()}`;
  const sent = await agentic.sendMessage(
    {
      sessionId,
      content: { parts: [{ part: { case: "text", value: "Say hello, then edit a file (smoke test from the TypeScript client)." } }] },
      requestId: randomUUID(),
      messageId,
    },
    callOpts,
  );
  if (sent.messageId !== messageId) fail(`SendMessage answered message_id ${sent.messageId}, want the chosen ${messageId}`);

  let deltas = 0;
  let granted = 0;
  let pendingRequest = "";
  for (;;) {
    const event = await events.waitFor(`the events of turn ${messageId}`, (e) => e.sessionId === sessionId);
    switch (event.payload.case) {
      case "messageDelta":
        if (event.payload.value.messageId === messageId && event.payload.value.text !== "") deltas++;
        break;
      case "toolPermissionRequired": {
        const request = event.payload.value.request ?? fail("TOOL_PERMISSION_REQUIRED without a request");
        if (!request.options.some((o) => o.kind === PermissionOptionKind.ALLOW_ONCE)) {
          fail(`permission request ${request.permissionId} offers no ALLOW_ONCE option`);
        }
        pendingRequest = request.permissionId;
        await agentic.respondPermission(
          {
            sessionId,
            permissionId: request.permissionId,
            answer: { case: "optionKind", value: PermissionOptionKind.ALLOW_ONCE },
            requestId: randomUUID(),
          },
          callOpts,
        );
        break;
      }
      case "toolPermissionGranted":
        if (event.payload.value.permissionId === pendingRequest) granted++;
        break;
      case "toolPermissionDenied":
        fail(`permission ${event.payload.value.permissionId} was denied: ${event.payload.value.reason}`);
        break;
      case "error":
        fail(`ERROR event ${ErrorReason[event.payload.value.reason]}: ${event.payload.value.message}`);
        break;
      case "messageEnd": {
        const end = event.payload.value;
        if (end.messageId !== messageId) break;
        if (end.stopReason !== StopReason.END_TURN) {
          fail(`turn ended with ${StopReason[end.stopReason]}, want END_TURN`);
        }
        if (deltas === 0) fail("turn ended without a MESSAGE_DELTA");
        if (pendingRequest === "") fail("turn ended without a TOOL_PERMISSION_REQUIRED");
        if (granted === 0) fail(`turn ended without TOOL_PERMISSION_GRANTED for ${pendingRequest}`);
        return `${deltas} deltas, permission ${pendingRequest} granted, MESSAGE_END(END_TURN)`;
      }
    }
  }
}

main().then(
  () => {
    console.log("ts smoke: all steps passed");
  },
  (err: unknown) => {
    const message = err instanceof StepFailure ? err.message : err instanceof Error ? (err.stack ?? err.message) : String(err);
    console.error(`FAIL ${message}`);
    process.exitCode = 1;
  },
);
