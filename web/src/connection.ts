// Whether the page reaches the server: one banner while any of its streams is down,
// cleared as soon as all are back, and the retry pace they share.
import { byId } from "./dom.js";

const banner = byId("offline");
const down = new Map<string, string>();
let attempts = 0;
const backListeners: Array<() => void> = [];

function show(): void {
  banner.hidden = down.size === 0;
  if (down.size > 0) {
    const why = [...down.values()][0];
    banner.textContent = `Lost the server (${why}); reconnecting…`;
  }
  banner.dataset.attempts = String(attempts);
}

/** A stream (named by the caller) failed; the page keeps trying. */
export function lost(stream: string, why: string): void {
  attempts++;
  down.set(stream, why);
  show();
}

/** A stream is live again. */
export function back(stream: string): void {
  const was = down.delete(stream);
  if (down.size === 0) attempts = 0;
  show();
  if (was || down.size === 0) for (const f of backListeners) f();
}

/** A stream that is no longer followed (its session was closed in the page). */
export function forget(stream: string): void {
  down.delete(stream);
  show();
}

export function isDown(): boolean {
  return down.size > 0;
}

/** Calls f whenever a stream comes back. */
export function onBack(f: () => void): void {
  backListeners.push(f);
}

/**
 * How long to wait before the next try after this many failures in a row. A server that
 * restarts is back within a second, so the page asks again at least that often: a short
 * request to a loopback or LAN server costs little. Some jitter keeps many tabs from
 * asking at the same instant.
 */
export function retryDelay(failures: number): number {
  const base = Math.min(800, 100 * 2 ** Math.min(failures, 4));
  return Math.round(base * (0.75 + Math.random() * 0.25));
}
