// The open session: its snapshot, its messages as they stream, its pending permission
// requests, and the subscription that keeps them current without a gap or a repeat.
// A dropped stream resumes after the last sequence applied (the screen is intact); a
// new page (a reload) draws the session from GetSession and the stored history, then
// subscribes from the snapshot's point, replaying a reply in flight from its start.
import { Code, ConnectError } from "@connectrpc/connect";
import type { AgenticEvent } from "../../gen/ts/src/agentic/v1/events_pb.js";
import { DeliveryMode } from "../../gen/ts/src/agentic/v1/service_pb.js";
import type { SubscribeResponse } from "../../gen/ts/src/agentic/v1/service_pb.js";
import {
  ConfigOptionType,
  ElicitationAction,
  MessageRole,
  MessageStatus,
  PermissionOptionKind,
  RiskLevel,
  SessionStatus,
  StopReason,
} from "../../gen/ts/src/agentic/v1/types_pb.js";
import type {
  Block,
  ConfigOption,
  ElicitationRequest,
  PermissionRequest,
  QueuedMessage,
  SessionInfo,
  SessionMessage,
  TokenUsage,
  ToolCall,
} from "../../gen/ts/src/agentic/v1/types_pb.js";
import type { JsonObject } from "@bufbuild/protobuf";
import { client, describe, isAbort, isTokenError, uuid, who } from "./api.js";
import { AuditPanel } from "./audit.js";
import { back, forget, lost, retryDelay } from "./connection.js";
import { byId, enumName, h } from "./dom.js";
import { renderElicitation } from "./elicitation.js";
import { Follower } from "./follow.js";
import { flushMarkdown, MarkdownPart, onMarkdownRendered } from "./markdown.js";
import { Outbox } from "./outbox.js";
import { renderBlock, renderDiff, renderPlan, renderTool, usageText } from "./render.js";

/** Asks the person for the token; resolves once one was given. */
export type AskToken = () => Promise<void>;

/** One message on screen. */
class MessageView {
  readonly el: HTMLElement;
  private readonly body: HTMLElement;
  private readonly footer: HTMLElement;
  private plan: HTMLElement | null = null;
  private text: MarkdownPart | null = null;
  private readonly tools = new Map<string, HTMLElement>();
  private readonly roleLabel: HTMLElement;

  constructor(
    readonly id: string,
    readonly role: MessageRole,
  ) {
    this.body = h("div", { class: "message-body" });
    this.footer = h("div", { class: "message-footer muted", "data-testid": "message-footer" });
    this.roleLabel = h("div", { class: "message-role muted", "data-testid": "message-role" }, role === MessageRole.USER ? "you" : role === MessageRole.SYSTEM ? "system" : "agent");
    this.el = h(
      "article",
      { class: `message role-${enumName(MessageRole, role)}`, "data-testid": "message", "data-message-id": id, "data-role": enumName(MessageRole, role), "data-state": "streaming" },
      this.roleLabel,
      this.body,
      this.footer,
    );
  }

  /**
   * Appends text to the message's last text part, or starts one. The agent's text is
   * Markdown; the person's own is shown as typed.
   */
  appendText(text: string): void {
    const last = this.body.lastElementChild;
    if (this.role === MessageRole.USER) {
      if (last instanceof HTMLElement && last.dataset.testid === "text") {
        last.append(text);
      } else {
        this.body.append(h("div", { class: "text plain", "data-testid": "text" }, text));
      }
      return;
    }
    if (this.text === null || last !== this.text.el) {
      this.text = new MarkdownPart(h("div", { class: "text markdown", "data-testid": "text" }));
      this.body.append(this.text.el);
    }
    this.text.append(text);
  }

  appendBlock(b: Block): void {
    const c = b.content;
    if (c.case === "text") {
      this.appendText(c.value.text);
    } else if (c.case === "reasoning") {
      // Consecutive reasoning blocks are chunks of one stream.
      const last = this.body.lastElementChild;
      if (last instanceof HTMLElement && last.dataset.testid === "reasoning") {
        last.lastElementChild?.append(c.value.text);
      } else {
        this.body.append(renderBlock(b));
      }
    } else if (c.case === "plan") {
      // A plan replaces the message's previous plan, where it stood.
      const el = renderPlan(c.value);
      if (this.plan !== null) {
        this.plan.replaceWith(el);
      } else {
        this.body.append(el);
      }
      this.plan = el;
    } else if (c.case === "tool") {
      this.tool(c.value, false);
    } else {
      this.body.append(renderBlock(b));
    }
  }

  /** Shows a tool call's new state; a running terminal's output is only what is new. */
  tool(tc: ToolCall, outputIsNew: boolean): void {
    const old = this.tools.get(tc.toolId);
    const el = renderTool(tc);
    if (old !== undefined) {
      if (outputIsNew) {
        carryTerminalOutput(old, el);
      }
      old.replaceWith(el);
    } else {
      this.body.append(el);
    }
    this.tools.set(tc.toolId, el);
  }

  /** Names the principal that sent a user message (its MESSAGE_END says who). */
  sentBy(principal: string): void {
    this.el.dataset.sender = principal;
    this.roleLabel.textContent = who(principal);
  }

  note(text: string, cls = "muted"): void {
    this.body.append(h("div", { class: `note ${cls}` }, text));
  }

  end(state: string, usage: TokenUsage | undefined): void {
    this.el.dataset.state = state;
    const u = usageText(usage);
    this.footer.textContent = [state === "complete" ? "" : state, u].filter((s) => s !== "").join(" · ");
  }
}

// TOOL_RUNNING carries only the terminal output that is new: put what was shown before
// in front of it.
function carryTerminalOutput(old: HTMLElement, fresh: HTMLElement): void {
  for (const term of fresh.querySelectorAll<HTMLElement>("[data-testid=terminal]")) {
    const prev = old.querySelector<HTMLElement>(`[data-terminal-id="${CSS.escape(term.dataset.terminalId ?? "")}"] .terminal-output`);
    const out = term.querySelector(".terminal-output");
    if (prev !== null && out !== null) {
      out.textContent = (prev.textContent ?? "") + (out.textContent ?? "");
    }
  }
}

// The delivery selector's values.
const deliveryModes: Record<string, DeliveryMode> = {
  queue: DeliveryMode.QUEUE,
  steer: DeliveryMode.STEER,
  interrupt: DeliveryMode.INTERRUPT,
};

const stateOfStatus: Record<number, string> = {
  [MessageStatus.COMPLETE]: "complete",
  [MessageStatus.INCOMPLETE]: "incomplete",
  [MessageStatus.CANCELLED]: "cancelled",
  [MessageStatus.ERROR]: "error",
};

function stateOfStop(r: StopReason): string {
  switch (r) {
    case StopReason.CANCELLED:
      return "cancelled";
    case StopReason.ERROR:
      return "error";
    case StopReason.INTERRUPTED:
      return "interrupted";
    case StopReason.REFUSAL:
      return "refused";
    case StopReason.MAX_TOKENS:
      return "max tokens";
    case StopReason.MAX_TURN_REQUESTS:
      return "max turn requests";
    default:
      return "complete";
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(t);
      resolve();
    });
  });
}

export class ChatView {
  private sessionId = "";
  private session: SessionInfo | null = null;
  private lastSeq = 0n;
  private needRebuild = true;
  // Set when the start of the message in flight is no longer held: the next rebuild
  // shows what the store has of it and re-reads it whole when it ends.
  private inFlightExpired = false;
  private stop: AbortController | null = null;
  private messages = new Map<string, MessageView>();
  // Messages drawn from the stored history: their events, if the stream brings them
  // again, are already on screen.
  private stored = new Set<string>();
  private reread = new Set<string>();
  private heartbeatMs = 30_000;

  private readonly root = byId("chat");
  private readonly list = byId("messages");
  private readonly permissions = byId("permissions");
  private readonly title = byId("session-title");
  private readonly status = byId("session-status");
  private readonly usage = byId("session-usage");
  private readonly connection = byId("connection");
  private readonly modeSelect = byId<HTMLSelectElement>("mode-select");
  private readonly modelSelect = byId<HTMLSelectElement>("model-select");
  private readonly configOptions = byId("config-options");
  private readonly cancelButton = byId<HTMLButtonElement>("cancel");
  private readonly closeButton = byId<HTMLButtonElement>("close-session");
  private readonly reopenButton = byId<HTMLButtonElement>("reopen-session");
  private readonly deleteButton = byId<HTMLButtonElement>("delete-session");
  private readonly elicitations = byId("elicitations");
  private readonly follower = new Follower(this.list, byId<HTMLButtonElement>("jump-end"));
  private readonly outbox = new Outbox(byId("outbox"), (m, err) => {
    // Refused, not lost: say why and give the text back to edit.
    if (m.sessionId === this.sessionId && this.input.value === "") this.input.value = m.text;
    void this.failed(err);
  });
  private readonly audit = new AuditPanel(byId<HTMLDetailsElement>("audit"), byId("audit-list"), byId<HTMLButtonElement>("audit-refresh"));
  private deleteTimer = 0;
  private readonly composer = byId<HTMLFormElement>("composer");
  private readonly input = byId<HTMLTextAreaElement>("message-input");
  private readonly delivery = byId<HTMLSelectElement>("delivery");
  private readonly queue = byId("queue");
  private readonly error = byId("chat-error");

  constructor(
    private readonly askToken: AskToken,
    private readonly sessionsChanged: () => void,
    private readonly deleted: (sessionId: string) => void,
  ) {
    onMarkdownRendered(() => this.follower.grew());
    this.composer.addEventListener("submit", (e) => {
      e.preventDefault();
      void this.send();
    });
    this.input.addEventListener("keydown", (e) => {
      // Enter sends; Shift+Enter is a new line.
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        this.composer.requestSubmit();
      }
    });
    this.cancelButton.addEventListener("click", () => void this.cancel());
    this.closeButton.addEventListener("click", () => void this.close());
    this.reopenButton.addEventListener("click", () => void this.reopen());
    this.deleteButton.addEventListener("click", () => void this.delete());
    this.modeSelect.addEventListener("change", () => void this.setMode(this.modeSelect.value));
    this.modelSelect.addEventListener("change", () => void this.setModel(this.modelSelect.value));
  }

  setHeartbeat(ms: number): void {
    if (ms > 0) this.heartbeatMs = ms;
  }

  get openSession(): string {
    return this.sessionId;
  }

  /** Shows a session and follows it until another is opened. */
  open(sessionId: string): void {
    if (sessionId === this.sessionId) return;
    this.stop?.abort();
    this.sessionId = sessionId;
    this.session = null;
    this.messages.clear();
    this.list.replaceChildren();
    this.permissions.replaceChildren();
    this.elicitations.replaceChildren();
    this.outbox.show(sessionId);
    this.audit.show(sessionId);
    this.resetDelete();
    this.root.hidden = sessionId === "";
    forget("chat");
    if (sessionId === "") {
      delete this.root.dataset.sessionId;
      return;
    }
    const stop = new AbortController();
    this.stop = stop;
    this.needRebuild = true;
    this.inFlightExpired = false;
    this.root.dataset.sessionId = sessionId;
    void this.follow(sessionId, stop.signal);
  }

  private async follow(id: string, signal: AbortSignal): Promise<void> {
    let failures = 0;
    while (!signal.aborted) {
      let rebuilt = false;
      try {
        if (this.needRebuild) {
          await this.rebuild(id, signal);
          this.needRebuild = false;
          rebuilt = true;
        }
        await this.stream(id, signal);
        failures = 0;
      } catch (err) {
        if (signal.aborted) return;
        const ce = ConnectError.from(err);
        if (isTokenError(err)) {
          this.setConnection("the server wants a token");
          await this.askToken();
          continue;
        }
        if (ce.code === Code.NotFound && this.session === null) {
          this.showError(describe(err));
          this.setConnection("no such session");
          forget("chat");
          return;
        }
        if (ce.code === Code.OutOfRange) {
          // The resume point is no longer held: redraw from the snapshot. If that was the
          // start of the reply in flight, draw that reply from the store this time.
          this.inFlightExpired = rebuilt;
          this.needRebuild = true;
        }
        failures++;
        lost("chat", describe(err));
        this.setConnection(`disconnected (${describe(err)}); retrying`);
        await sleep(retryDelay(failures), signal);
      }
    }
  }

  /** Redraws the session from GetSession and its stored history. */
  private async rebuild(id: string, signal: AbortSignal): Promise<void> {
    this.setConnection("loading");
    delete this.root.dataset.live;
    const { session } = await client.getSession({ sessionId: id }, { signal });
    if (session === undefined) throw new Error("GetSession answered without a session");
    // The history is read after the snapshot: whatever ends in between is in the
    // history, and its events, which the stream brings again, are skipped.
    const history: SessionMessage[] = [];
    let pageToken = "";
    do {
      const page = await client.listMessages({ sessionId: id, pageToken }, { signal });
      history.push(...page.messages);
      pageToken = page.nextPageToken;
    } while (pageToken !== "");

    this.messages.clear();
    this.stored.clear();
    this.reread.clear();
    this.list.replaceChildren();
    this.permissions.replaceChildren();
    this.elicitations.replaceChildren();
    this.error.textContent = "";
    this.session = session;

    // A reply in flight is replayed whole from the server's buffer (from the event before
    // its first one), so its stored part is left out here.
    const inFlight = session.messageInFlight;
    const replayInFlight = inFlight !== "" && session.messageInFlightFirstSequence > 0n && !this.inFlightExpired;
    for (const m of history) {
      if (replayInFlight && m.messageId === inFlight) continue;
      const view = this.message(m.messageId, m.role);
      if (m.principal !== "") view.sentBy(m.principal);
      for (const b of m.blocks) view.appendBlock(b);
      if (m.messageId === inFlight) {
        // Its start is no longer held: show what is stored and read it again at its end.
        this.reread.add(m.messageId);
        view.note("part of this reply was sent before this page could follow it; it shows whole when the turn ends");
        continue;
      }
      view.end(stateOfStatus[m.status] ?? "complete", m.usage);
      this.stored.add(m.messageId);
    }
    for (const p of session.pendingPermissions) this.addPermission(p);
    for (const e of session.pendingElicitations) this.addElicitation(e);
    this.lastSeq = replayInFlight ? session.messageInFlightFirstSequence - 1n : session.lastSequence;
    this.inFlightExpired = false;
    this.renderHeader();
    this.renderQueue();
    // An opened session shows its end.
    flushMarkdown();
    this.follower.toEnd();
  }

  /** Follows the session's events after lastSeq until the stream ends or fails. */
  private async stream(id: string, signal: AbortSignal): Promise<void> {
    // A stream that stays silent longer than two heartbeats is dead (a proxy or network
    // dropped it without closing): end it and resume.
    const stream = new AbortController();
    const onAbort = () => stream.abort();
    signal.addEventListener("abort", onAbort);
    let timer = 0;
    const kick = () => {
      clearTimeout(timer);
      timer = window.setTimeout(() => stream.abort(), 2 * this.heartbeatMs + 5_000);
    };
    kick();
    this.setConnection("connecting");
    try {
      const frames = client.subscribe(
        { sessionIds: [id], start: { case: "afterSequence", value: this.lastSeq } },
        { signal: stream.signal },
      );
      for await (const frame of frames) {
        kick();
        this.frame(frame);
      }
    } catch (err) {
      if (isAbort(err) && !signal.aborted) {
        throw new Error("no heartbeat from the server");
      }
      throw err;
    } finally {
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
    }
    // The server ended the stream (it is shutting down): the caller resumes.
    throw new Error("the server ended the event stream");
  }

  private frame(frame: SubscribeResponse): void {
    const f = frame.frame;
    switch (f.case) {
      case "events":
        for (const ev of f.value.events) {
          // A repeat of something already applied (a replay overlapping the history).
          if (ev.sequence <= this.lastSeq) continue;
          this.apply(ev);
          this.lastSeq = ev.sequence;
        }
        break;
      case "bookmark":
      case "caughtUp":
        if (f.value.sequence > this.lastSeq) {
          this.lastSeq = f.value.sequence;
        }
        if (f.case === "caughtUp") {
          this.root.dataset.live = "true";
          this.setConnection("live");
          back("chat");
        }
        break;
    }
  }

  private apply(ev: AgenticEvent): void {
    const p = ev.payload;
    const s = this.session;
    if (s === null) return;
    switch (p.case) {
      case "sessionCreated":
        if (p.value.session !== undefined) this.session = p.value.session;
        this.renderHeader();
        break;
      case "sessionUpdated":
        if (p.value.session !== undefined) mergeSession(s, p.value.session, p.value.updateMask?.paths ?? []);
        this.renderHeader();
        this.renderQueue();
        break;
      case "statusChanged":
        s.status = p.value.status;
        s.statusReason = p.value.reason;
        this.renderHeader();
        this.sessionsChanged();
        break;
      case "sessionClosed":
        s.status = SessionStatus.CLOSED;
        s.messageInFlight = "";
        this.renderHeader();
        break;
      case "messageDelta":
        if (this.stored.has(p.value.messageId)) break;
        this.message(p.value.messageId, p.value.role).appendText(p.value.text);
        this.startTurn(p.value.messageId, p.value.role);
        break;
      case "messageBlock":
        if (this.stored.has(p.value.messageId) || p.value.block === undefined) break;
        this.message(p.value.messageId, p.value.role).appendBlock(p.value.block);
        this.startTurn(p.value.messageId, p.value.role);
        break;
      case "toolStart":
      case "toolRunning":
      case "toolEnd":
        if (this.stored.has(p.value.messageId) || p.value.tool === undefined) break;
        this.message(p.value.messageId, MessageRole.ASSISTANT).tool(p.value.tool, p.case === "toolRunning");
        this.startTurn(p.value.messageId, MessageRole.ASSISTANT);
        break;
      case "messageEnd":
        if (p.value.role === MessageRole.USER && p.value.principal !== "" && !this.stored.has(p.value.messageId)) {
          this.message(p.value.messageId, p.value.role).sentBy(p.value.principal);
        }
        this.endMessage(p.value.messageId, p.value.role, stateOfStop(p.value.stopReason), p.value.usage);
        break;
      case "toolPermissionRequired":
        if (p.value.request !== undefined) this.addPermission(p.value.request);
        break;
      case "toolPermissionGranted":
      case "toolPermissionDenied":
        this.decided(p.value.permissionId, p.case === "toolPermissionGranted", p.value.reason, p.value.principal);
        break;
      case "elicitationRequired":
        if (p.value.request !== undefined) this.addElicitation(p.value.request);
        break;
      case "elicitationResolved":
        this.elicitationResolved(p.value.elicitationId, enumName(ElicitationAction, p.value.action), p.value.reason, p.value.principal);
        break;
      case "messageQueued":
        if (p.value.message !== undefined) s.queuedMessages = [...s.queuedMessages, p.value.message];
        this.renderQueue();
        break;
      case "messageDequeued":
        s.queuedMessages = s.queuedMessages.filter((q) => q.messageId !== p.value.messageId);
        this.renderQueue();
        break;
      case "error":
        this.showError(p.value.message);
        break;
    }
    this.follower.grew();
  }

  private startTurn(messageId: string, role: MessageRole): void {
    const s = this.session;
    if (s !== null && role !== MessageRole.USER && role !== MessageRole.SYSTEM && s.messageInFlight !== messageId) {
      s.messageInFlight = messageId;
      this.renderHeader();
    }
  }

  private endMessage(id: string, role: MessageRole, state: string, usage: TokenUsage | undefined): void {
    if (this.stored.has(id)) return;
    const view = this.message(id, role);
    view.end(state, usage);
    const s = this.session;
    if (s !== null && s.messageInFlight === id) {
      s.messageInFlight = "";
      for (const el of this.permissions.querySelectorAll<HTMLElement>("[data-testid=permission]")) {
        if (el.dataset.messageId === id || el.dataset.messageId === "") el.remove();
      }
      for (const el of this.elicitations.querySelectorAll<HTMLElement>("[data-testid=elicitation]")) {
        if (el.dataset.messageId === id) el.remove();
      }
      this.renderHeader();
    }
    if (this.reread.delete(id)) void this.rereadMessage(id);
  }

  private async rereadMessage(id: string): Promise<void> {
    try {
      const { message } = await client.getMessage({ sessionId: this.sessionId, messageId: id });
      const old = this.messages.get(id);
      if (message === undefined || old === undefined) return;
      const view = new MessageView(id, message.role);
      for (const b of message.blocks) view.appendBlock(b);
      view.end(stateOfStatus[message.status] ?? "complete", message.usage);
      old.el.replaceWith(view.el);
      this.messages.set(id, view);
    } catch (err) {
      this.showError(describe(err));
    }
  }

  private message(id: string, role: MessageRole): MessageView {
    let view = this.messages.get(id);
    if (view === undefined) {
      view = new MessageView(id, role);
      this.messages.set(id, view);
      this.list.append(view.el);
    }
    return view;
  }

  private addPermission(p: PermissionRequest): void {
    const card = h(
      "div",
      { class: "permission", role: "group", "data-testid": "permission", "data-permission-id": p.permissionId, "data-message-id": p.messageId, "aria-label": `permission for ${p.toolName || p.toolId}` },
      h("div", { class: "permission-title" }, p.description || `${p.toolName || p.toolId} wants permission`),
      p.commandInfo !== undefined && p.commandInfo.command !== ""
        ? h(
            "div",
            { "data-testid": "permission-command" },
            h("code", {}, p.commandInfo.command),
            p.commandInfo.cwd !== "" ? h("span", { class: "muted" }, ` in ${p.commandInfo.cwd}`) : null,
            h("span", { class: "muted" }, ` risk ${enumName(RiskLevel, p.commandInfo.riskLevel)}: ${p.commandInfo.reason}`),
          )
        : null,
      p.paths.length > 0 ? h("div", { class: "muted" }, p.paths.join(", ")) : null,
      // What the tool would change, above the answers: seen before it is allowed.
      p.diffs.length > 0 ? h("div", { class: "permission-diffs" }, ...p.diffs.map(renderDiff)) : null,
    );
    const buttons = h("div", { class: "permission-options" });
    for (const o of p.options) {
      const kind = enumName(PermissionOptionKind, o.kind);
      const b = h("button", { type: "button", class: `option option-${kind}`, "data-testid": "permission-option", "data-option-id": o.optionId, "data-option-kind": kind }, o.name || o.optionId);
      b.addEventListener("click", () => void this.respond(p.permissionId, o.optionId, card));
      buttons.append(b);
    }
    card.append(buttons);
    const old = this.permissions.querySelector(`[data-permission-id="${CSS.escape(p.permissionId)}"]`);
    if (old !== null) {
      old.replaceWith(card);
    } else {
      this.permissions.append(card);
      // The first option is where the keyboard goes when a request appears.
      if (this.permissions.childElementCount === 1 && document.activeElement === document.body) {
        buttons.querySelector("button")?.focus();
      }
    }
  }

  private decided(permissionId: string, granted: boolean, reason: string, principal: string): void {
    const card = this.permissions.querySelector<HTMLElement>(`[data-permission-id="${CSS.escape(permissionId)}"]`);
    if (card === null) return;
    const messageId = card.dataset.messageId ?? "";
    card.remove();
    const view = this.messages.get(messageId);
    const title = card.querySelector(".permission-title")?.textContent ?? "permission";
    const by = principal !== "" ? ` by ${who(principal)}` : "";
    view?.note(`${granted ? "allowed" : "denied"}${by}: ${title}${reason !== "" ? ` (${reason})` : ""}`, granted ? "muted" : "warn");
  }

  private async respond(permissionId: string, optionId: string, card: HTMLElement): Promise<void> {
    for (const b of card.querySelectorAll("button")) b.disabled = true;
    try {
      await client.respondPermission({ sessionId: this.sessionId, permissionId, answer: { case: "optionId", value: optionId }, requestId: uuid() });
    } catch (err) {
      for (const b of card.querySelectorAll("button")) b.disabled = false;
      await this.failed(err);
    }
  }

  private send(): void {
    const text = this.input.value;
    if (text.trim() === "") {
      this.input.focus();
      return;
    }
    // The outbox sends it now, or shows it waiting while the server is away.
    this.input.value = "";
    this.error.textContent = "";
    this.outbox.send(this.sessionId, text, deliveryModes[this.delivery.value] ?? DeliveryMode.QUEUE);
  }

  /** Shows the messages waiting in the session's queue, each with a way to take it out. */
  private renderQueue(): void {
    const queued = this.session?.queuedMessages ?? [];
    this.queue.replaceChildren(
      ...queued.map((q) => {
        const remove = h("button", { type: "button", class: "small", "data-testid": "queued-remove" }, "Remove");
        remove.addEventListener("click", () => void this.removeQueued(q, remove));
        const text = q.content?.parts.map((part) => (part.part.case === "text" ? part.part.value : "")).join(" ") ?? "";
        return h(
          "li",
          { "data-testid": "queued-message", "data-message-id": q.messageId },
          h("span", { class: "muted small" }, "queued: "),
          h("span", { class: "queued-text" }, text),
          q.reason !== "" ? h("span", { class: "muted small" }, ` (${q.reason})`) : null,
          " ",
          remove,
        );
      }),
    );
  }

  private async removeQueued(q: QueuedMessage, button: HTMLButtonElement): Promise<void> {
    button.disabled = true;
    try {
      // Its MESSAGE_DEQUEUED takes it off the list.
      await client.cancelMessage({ sessionId: this.sessionId, messageId: q.userMessageId, requestId: uuid() });
    } catch (err) {
      button.disabled = false;
      await this.failed(err);
    }
  }

  private addElicitation(r: ElicitationRequest): void {
    const card = renderElicitation(r, (action, content) => this.respondElicitation(r.elicitationId, action, content));
    const old = this.elicitations.querySelector(`[data-elicitation-id="${CSS.escape(r.elicitationId)}"]`);
    if (old !== null) {
      old.replaceWith(card);
    } else {
      this.elicitations.append(card);
    }
  }

  private elicitationResolved(id: string, action: string, reason: string, principal: string): void {
    const card = this.elicitations.querySelector<HTMLElement>(`[data-elicitation-id="${CSS.escape(id)}"]`);
    if (card === null) return;
    card.remove();
    const title = card.querySelector(".elicitation-title")?.textContent ?? "input";
    const by = principal !== "" ? ` by ${who(principal)}` : "";
    this.messages.get(card.dataset.messageId ?? "")?.note(`${action}${by}: ${title}${reason !== "" ? ` (${reason})` : ""}`);
  }

  private async respondElicitation(elicitationId: string, action: ElicitationAction, content: JsonObject | undefined): Promise<string> {
    try {
      await client.respondElicitation({ sessionId: this.sessionId, elicitationId, action, content, requestId: uuid() });
      return "";
    } catch (err) {
      if (isTokenError(err)) {
        await this.askToken();
        return "signed out: sign in and answer again";
      }
      return describe(err);
    }
  }

  private async close(): Promise<void> {
    try {
      await client.closeSession({ sessionId: this.sessionId });
    } catch (err) {
      await this.failed(err);
    }
  }

  private async reopen(): Promise<void> {
    try {
      await client.loadSession({ sessionId: this.sessionId });
    } catch (err) {
      await this.failed(err);
    }
  }

  private resetDelete(): void {
    clearTimeout(this.deleteTimer);
    this.deleteButton.textContent = "Delete…";
    delete this.deleteButton.dataset.confirm;
  }

  // Deleting cannot be undone: the first click asks, a second within a few seconds does it.
  private async delete(): Promise<void> {
    if (this.deleteButton.dataset.confirm !== "true") {
      this.deleteButton.dataset.confirm = "true";
      this.deleteButton.textContent = "Delete for good";
      this.deleteTimer = window.setTimeout(() => this.resetDelete(), 5000);
      return;
    }
    this.resetDelete();
    const id = this.sessionId;
    try {
      await client.deleteSession({ sessionId: id, requestId: uuid() });
      this.deleted(id);
    } catch (err) {
      await this.failed(err);
    }
  }

  private async cancel(): Promise<void> {
    try {
      await client.cancelMessage({ sessionId: this.sessionId, messageId: this.session?.messageInFlight ?? "", requestId: uuid() });
    } catch (err) {
      await this.failed(err);
    }
  }

  private async setMode(modeId: string): Promise<void> {
    try {
      const { session } = await client.setMode({ sessionId: this.sessionId, modeId });
      if (session !== undefined && this.session !== null) this.session.currentModeId = session.currentModeId;
    } catch (err) {
      await this.failed(err);
    }
    this.renderHeader();
  }

  private async setModel(modelId: string): Promise<void> {
    try {
      const { session } = await client.setModel({ sessionId: this.sessionId, modelId });
      if (session !== undefined && this.session !== null) this.session.currentModelId = session.currentModelId;
    } catch (err) {
      await this.failed(err);
    }
    this.renderHeader();
  }

  private async setConfigOption(configId: string, value: string): Promise<void> {
    try {
      const { session } = await client.setConfigOption({ sessionId: this.sessionId, configId, value });
      if (session !== undefined && this.session !== null) this.session.configOptions = session.configOptions;
    } catch (err) {
      await this.failed(err);
    }
    this.renderHeader();
  }

  // renderConfigOptions shows the agent's config options other than its modes and
  // models (those have their own selects), one labelled select each.
  private renderConfigOptions(options: ConfigOption[]): void {
    const shown = options.filter((o) => o.category !== "mode" && o.category !== "model");
    const key = JSON.stringify(shown.map((o) => o.id));
    if (this.configOptions.dataset.items !== key) {
      this.configOptions.dataset.items = key;
      this.configOptions.replaceChildren(
        ...shown.flatMap((o) => {
          const id = `config-${o.id}`;
          const select = h("select", { id, "data-config-id": o.id });
          select.addEventListener("change", () => void this.setConfigOption(o.id, select.value));
          return [h("label", { for: id, title: o.description }, o.name || o.id), select];
        }),
      );
    }
    for (const o of shown) {
      const select = this.configOptions.querySelector<HTMLSelectElement>(`select[data-config-id="${CSS.escape(o.id)}"]`);
      if (select === null) continue;
      const choices =
        o.type === ConfigOptionType.BOOLEAN
          ? [
              { id: "true", name: "on" },
              { id: "false", name: "off" },
            ]
          : o.choices.map((c) => ({ id: c.value, name: c.group !== "" ? `${c.group}: ${c.name}` : c.name }));
      fillSelect(select, choices, o.currentValue);
    }
  }

  private async failed(err: unknown): Promise<void> {
    if (isTokenError(err)) {
      await this.askToken();
      return;
    }
    this.showError(describe(err));
  }

  private showError(text: string): void {
    this.error.textContent = text;
  }

  private setConnection(text: string): void {
    this.connection.textContent = text;
  }

  private renderHeader(): void {
    const s = this.session;
    if (s === null) return;
    this.title.textContent = s.title || s.sessionId;
    const status = enumName(SessionStatus, s.status);
    this.status.textContent = s.statusReason !== "" ? `${status}: ${s.statusReason}` : status;
    this.status.dataset.status = status;
    this.usage.textContent = usageText(s.usage);
    fillSelect(this.modeSelect, s.availableModes, s.currentModeId);
    fillSelect(this.modelSelect, s.availableModels, s.currentModelId);
    this.renderConfigOptions(s.configOptions);
    const running = s.messageInFlight !== "" || s.status === SessionStatus.GENERATING || s.status === SessionStatus.PAUSED;
    this.cancelButton.disabled = !running;
    const closed = s.status === SessionStatus.CLOSED;
    this.closeButton.hidden = closed;
    this.reopenButton.hidden = !closed;
    this.root.dataset.turn = running ? "running" : "idle";
  }

}

function fillSelect(select: HTMLSelectElement, items: Array<{ id: string; name: string }>, current: string): void {
  // Rebuilt only when the choices change, so that a keyboard user's place in the list
  // survives the session's other updates.
  const key = JSON.stringify(items.map((i) => [i.id, i.name]));
  if (select.dataset.items !== key) {
    select.dataset.items = key;
    select.replaceChildren(...items.map((i) => h("option", { value: i.id }, i.name || i.id)));
  }
  select.disabled = items.length === 0;
  select.value = current;
}

// SESSION_UPDATED names the SessionInfo fields it sets (proto names); the others stay.
function mergeSession(into: SessionInfo, from: SessionInfo, paths: string[]): void {
  const target = into as unknown as Record<string, unknown>;
  const source = from as unknown as Record<string, unknown>;
  for (const path of paths) {
    const field = path.split(".")[0].replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
    if (field in source) target[field] = source[field];
  }
}
