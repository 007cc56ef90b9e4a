// The connection to agenticd: one Connect client for the page, the bearer token kept
// for this tab, and how errors read to a person.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import type { Client, Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { AgenticService } from "../../gen/ts/src/agentic/v1/service_pb.js";

export type AgenticClient = Client<typeof AgenticService>;

const tokenKey = "agenticd.token";

/** The bearer token for this tab ("" when none was given). */
export function token(): string {
  return sessionStorage.getItem(tokenKey) ?? "";
}

export function setToken(value: string): void {
  if (value === "") {
    sessionStorage.removeItem(tokenKey);
  } else {
    sessionStorage.setItem(tokenKey, value);
  }
}

const bearer: Interceptor = (next) => (req) => {
  const t = token();
  if (t !== "") {
    req.header.set("Authorization", `Bearer ${t}`);
  }
  return next(req);
};

// Binary Protobuf rather than JSON: a turn is mostly small MESSAGE_DELTA events, which
// decode faster and travel smaller in binary, 64-bit sequences need no string round
// trip, and the server can hand its already encoded events through unchanged.
export const client: AgenticClient = createClient(
  AgenticService,
  createConnectTransport({ baseUrl: location.origin, useBinaryFormat: true, interceptors: [bearer] }),
);

/** The reason of agenticd's google.rpc.ErrorInfo on err, "" when it carries none. */
export function reasonOf(err: unknown): string {
  const ce = ConnectError.from(err);
  for (const d of ce.details) {
    if ("type" in d && d.type === "google.rpc.ErrorInfo") {
      return errorInfoReason(d.value);
    }
  }
  return "";
}

// ErrorInfo is three fields (reason = 1, domain = 2, metadata = 3); only the reason is
// read, so its one field is decoded here instead of shipping the google.rpc schema.
function errorInfoReason(bytes: Uint8Array): string {
  const r = new BinaryReader(bytes);
  while (r.pos < r.len) {
    const [field, wireType] = r.tag();
    if (field === 1 && wireType === WireType.LengthDelimited) {
      return r.string();
    }
    r.skip(wireType);
  }
  return "";
}

/** Whether err means this tab's token is missing or wrong (not an agent's own login). */
export function isTokenError(err: unknown): boolean {
  const ce = ConnectError.from(err);
  return ce.code === Code.Unauthenticated && reasonOf(err) !== "AGENT_AUTH_REQUIRED";
}

/**
 * Whether err means the server was not reached (down, restarting, the network gone)
 * rather than that it answered no: a failed fetch has no code and no ErrorInfo.
 */
export function isNetworkError(err: unknown): boolean {
  const ce = ConnectError.from(err);
  if (ce.code === Code.Unavailable) return true;
  return ce.code === Code.Unknown && reasonOf(err) === "";
}

export function isAbort(err: unknown): boolean {
  return ConnectError.from(err).code === Code.Canceled;
}

/** What went wrong, for a person: the server's message says what to do. */
export function describe(err: unknown): string {
  const ce = ConnectError.from(err);
  const reason = reasonOf(err);
  return reason !== "" ? `${ce.rawMessage} (${reason})` : ce.rawMessage;
}

/** A random UUID; crypto.randomUUID exists only in secure contexts (https, loopback). */
export function uuid(): string {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const hex = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The principal this page is signed in as (GetServerInfo's caller), once known. */
export const signedIn = { principal: "" };

/** A principal's name as the page shows it: "you" added for the one signed in. */
export function who(principal: string): string {
  return principal === signedIn.principal ? `${principal} (you)` : principal;
}
