// Messages the person sent while the server was out of reach. They are shown where they
// wait, can be taken back, and go out in order as soon as the server is back, each with
// the ids chosen when it was written: a repeat of one the server already took is
// answered as that one (request_id) or refused as taken (message_id), never run twice.
import type { DeliveryMode } from "../../gen/ts/src/agentic/v1/service_pb.js";
import { client, isNetworkError, reasonOf, uuid } from "./api.js";
import { isDown, onBack } from "./connection.js";
import { h } from "./dom.js";

export interface Outgoing {
  readonly sessionId: string;
  readonly text: string;
  // What to do with it while a turn runs.
  readonly delivery: DeliveryMode;
  requestId: string;
  readonly messageId: string;
  readonly userMessageId: string;
  // Whether the page already reopened the session for it (once).
  reopened?: boolean;
}

/** Called when the server refused a message (not merely was unreachable). */
export type Refused = (m: Outgoing, err: unknown) => void;

export class Outbox {
  private readonly items: Outgoing[] = [];
  private draining = false;
  private shownSession = "";

  constructor(
    private readonly el: HTMLElement,
    private readonly refused: Refused,
  ) {
    onBack(() => void this.drain());
  }

  /** Sends text to the session now, or keeps it until the server is back. */
  send(sessionId: string, text: string, delivery: DeliveryMode): void {
    this.items.push({ sessionId, text, delivery, requestId: uuid(), messageId: uuid(), userMessageId: uuid() });
    this.render();
    void this.drain();
  }

  /** Shows the messages waiting for this session. */
  show(sessionId: string): void {
    this.shownSession = sessionId;
    this.render();
  }

  private render(): void {
    const waiting = this.items.filter((m) => m.sessionId === this.shownSession);
    this.el.replaceChildren(
      ...waiting.map((m) => {
        const cancel = h("button", { type: "button", class: "small", "data-testid": "outbox-cancel" }, "Don't send");
        cancel.addEventListener("click", () => this.remove(m));
        return h(
          "li",
          { "data-testid": "outbox-item", "data-message-id": m.messageId },
          h("span", { class: "outbox-text" }, m.text),
          " ",
          h("span", { class: "muted small" }, isDown() ? "waiting for the server" : "sending"),
          " ",
          cancel,
        );
      }),
    );
  }

  private remove(m: Outgoing): void {
    const i = this.items.indexOf(m);
    if (i >= 0) this.items.splice(i, 1);
    this.render();
  }

  private async drain(): Promise<void> {
    if (this.draining) return;
    this.draining = true;
    try {
      while (this.items.length > 0 && !isDown()) {
        const m = this.items[0];
        try {
          await client.sendMessage({
            sessionId: m.sessionId,
            content: { parts: [{ part: { case: "text", value: m.text } }] },
            delivery: m.delivery,
            requestId: m.requestId,
            messageId: m.messageId,
            userMessageId: m.userMessageId,
          });
        } catch (err) {
          if (isNetworkError(err)) {
            // Stays first in line; the connection's return drains again, and so does a
            // later try in case the streams never noticed the server was gone.
            if (!isDown()) setTimeout(() => void this.drain(), 1000);
            break;
          }
          const reason = reasonOf(err);
          // A session is closed after a server restart until it is loaded again; a
          // message written to it means to go on with it.
          if (reason === "SESSION_CLOSED" && m.reopened !== true) {
            m.reopened = true;
            try {
              await client.loadSession({ sessionId: m.sessionId });
              // The server remembers the refusal under the old request_id; the
              // message_id still keeps the message from being taken twice.
              m.requestId = uuid();
              continue;
            } catch (loadErr) {
              if (isNetworkError(loadErr)) break;
              err = loadErr;
            }
          }
          // Taken already: an earlier try reached the server before the line dropped.
          if (reasonOf(err) !== "MESSAGE_ID_IN_USE") this.refused(m, err);
        }
        this.remove(m);
      }
    } finally {
      this.draining = false;
      this.render();
    }
  }
}
