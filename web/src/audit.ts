// The audit trail of the open session: what its tool calls wrote and ran, what was
// asked and who decided, read from ListAuditEvents when the panel is opened.
import { AuditKind, WebhookOutcome } from "../../gen/ts/src/agentic/v1/audit_pb.js";
import type { AuditEvent } from "../../gen/ts/src/agentic/v1/audit_pb.js";
import { ElicitationAction, WebhookEvent } from "../../gen/ts/src/agentic/v1/types_pb.js";
import { client, describe, who } from "./api.js";
import { enumName, h } from "./dom.js";

function summary(e: AuditEvent): string {
  const d = e.detail;
  switch (d.case) {
    case "session":
      return [d.value.workspace, d.value.reason].filter((s) => s !== "").join(" — ");
    case "fileWrite":
      return `${d.value.deleted ? "deleted" : "wrote"} ${d.value.path}${d.value.bytes !== undefined ? ` (${d.value.bytes} bytes)` : ""}`;
    case "command": {
      const c = d.value;
      const where = c.cwd !== "" ? ` in ${c.cwd}` : "";
      if (c.denied) return `$ ${c.commandLine}${where}: denied, it never ran`;
      return `$ ${c.commandLine}${where}${c.exitCode !== undefined ? ` (exit ${c.exitCode})` : ""}`;
    }
    case "permission": {
      const what = d.value.description || d.value.commandLine || d.value.paths.join(", ");
      if (e.kind !== AuditKind.PERMISSION_DECIDED) return what;
      return `${what}: ${d.value.granted ? "allowed" : "denied"}${d.value.optionId !== "" ? ` (${d.value.optionId})` : ""}${d.value.reason !== "" ? ` — ${d.value.reason}` : ""}`;
    }
    case "denial":
      return `denied: ${d.value.reason}`;
    case "elicitation": {
      if (e.kind !== AuditKind.ELICITATION_RESOLVED) return d.value.message || d.value.url;
      const fields = d.value.answeredFields.length > 0 ? ` (${d.value.answeredFields.join(", ")})` : "";
      return `${d.value.message}: ${enumName(ElicitationAction, d.value.action)}${fields}${d.value.reason !== "" ? ` — ${d.value.reason}` : ""}`;
    }
    case "webhook": {
      const w = d.value;
      if (w.outcome === WebhookOutcome.DROPPED) return `${w.dropped} webhook deliveries dropped: the queue was full`;
      const status = w.httpStatus !== 0 ? `, HTTP ${w.httpStatus}` : "";
      return `${enumName(WebhookEvent, w.event)} to ${w.hook} (${w.host}): ${enumName(WebhookOutcome, w.outcome)}, attempt ${w.attempt}${status}${w.error !== "" ? ` — ${w.error}` : ""}`;
    }
    default:
      return "";
  }
}

export class AuditPanel {
  private sessionId = "";
  private loading: AbortController | null = null;

  constructor(
    private readonly panel: HTMLDetailsElement,
    private readonly list: HTMLElement,
    refresh: HTMLButtonElement,
  ) {
    panel.addEventListener("toggle", () => {
      if (panel.open) void this.load();
    });
    refresh.addEventListener("click", () => void this.load());
  }

  /** Follows another session; the panel reads it when open. */
  show(sessionId: string): void {
    this.sessionId = sessionId;
    this.loading?.abort();
    this.list.replaceChildren();
    if (this.panel.open && sessionId !== "") void this.load();
  }

  private async load(): Promise<void> {
    const id = this.sessionId;
    if (id === "") return;
    this.loading?.abort();
    const stop = new AbortController();
    this.loading = stop;
    const rows: HTMLElement[] = [];
    try {
      let after = 0n;
      for (;;) {
        const page = await client.listAuditEvents({ sessionIds: [id], afterId: after }, { signal: stop.signal });
        for (const e of page.events) {
          const time = e.eventTime !== undefined ? new Date(Number(e.eventTime.seconds) * 1000).toLocaleTimeString() : "";
          // A command whose permission was denied never ran: marked, not just worded.
          const denied = e.detail.case === "command" && e.detail.value.denied;
          rows.push(
            h("li", { "data-testid": "audit-entry", "data-kind": enumName(AuditKind, e.kind), "data-denied": denied, class: denied ? "audit-denied" : false },
              h("span", { class: "muted small" }, time), " ",
              h("span", { class: "audit-kind" }, enumName(AuditKind, e.kind).replace(/_/g, " ")), " ",
              denied && h("span", { class: "audit-verdict", "data-testid": "audit-denied" }, "denied"), denied && " ",
              e.principal !== "" && h("span", { class: "audit-principal", "data-testid": "audit-principal" }, who(e.principal)), e.principal !== "" && " ",
              h("span", { class: "audit-summary" }, summary(e))),
          );
          after = e.id;
        }
        if (!page.more || page.events.length === 0) break;
      }
      if (this.sessionId === id) this.list.replaceChildren(...(rows.length > 0 ? rows : [h("li", { class: "muted" }, "nothing recorded yet")]));
    } catch (err) {
      if (!stop.signal.aborted) this.list.replaceChildren(h("li", { class: "error" }, describe(err)));
    }
  }
}
