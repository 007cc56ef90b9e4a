// Renders the typed parts of a message: tool calls, diffs, terminals, plans and the
// other blocks. Pure functions from protobuf messages to elements.
import type {
  Block,
  DiffBlock,
  PlanBlock,
  TerminalBlock,
  TokenUsage,
  ToolCall,
  ToolContent,
} from "../../gen/ts/src/agentic/v1/types_pb.js";
import { PlanEntryStatus, ToolKind, ToolStatus } from "../../gen/ts/src/agentic/v1/types_pb.js";
import { enumName, h } from "./dom.js";

// Above this many line pairs the diff is not computed (it is quadratic): the old text is
// shown removed and the new one added.
const maxDiffCells = 4_000_000;

/** A unified line diff of a whole-file change. */
export function renderDiff(d: DiffBlock): HTMLElement {
  const oldLines = d.oldText === "" ? [] : d.oldText.split("\n");
  const newLines = d.newText.split("\n");
  const pre = h("pre", { class: "diff-lines" });
  for (const [op, line] of lineDiff(oldLines, newLines)) {
    const cls = op === "+" ? "add" : op === "-" ? "del" : "ctx";
    pre.append(h("span", { class: cls }, `${op} ${line}\n`));
  }
  return h(
    "div",
    { class: "diff", "data-testid": "diff" },
    h("div", { class: "diff-path" }, d.oldText === "" ? `new file ${d.path}` : d.path),
    pre,
  );
}

function lineDiff(a: string[], b: string[]): Array<["+" | "-" | " ", string]> {
  if (a.length * b.length > maxDiffCells) {
    return [...a.map((l): ["-", string] => ["-", l]), ...b.map((l): ["+", string] => ["+", l])];
  }
  // Longest common subsequence, filled from the end so the walk below goes forward.
  const n = a.length;
  const m = b.length;
  const lcs = new Uint32Array((n + 1) * (m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i * (m + 1) + j] =
        a[i] === b[j] ? lcs[(i + 1) * (m + 1) + j + 1] + 1 : Math.max(lcs[(i + 1) * (m + 1) + j], lcs[i * (m + 1) + j + 1]);
    }
  }
  const out: Array<["+" | "-" | " ", string]> = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) {
      out.push([" ", a[i]]);
      i++;
      j++;
    } else if (lcs[(i + 1) * (m + 1) + j] >= lcs[i * (m + 1) + j + 1]) {
      out.push(["-", a[i++]]);
    } else {
      out.push(["+", b[j++]]);
    }
  }
  while (i < n) out.push(["-", a[i++]]);
  while (j < m) out.push(["+", b[j++]]);
  return out;
}

export function renderTerminal(t: TerminalBlock): HTMLElement {
  const exit = t.exitCode !== undefined ? `exit ${t.exitCode}` : t.signal !== "" ? `signal ${t.signal}` : "running";
  return h(
    "div",
    { class: "terminal", "data-testid": "terminal", "data-terminal-id": t.terminalId },
    h("div", { class: "terminal-head" }, `$ ${t.command}`, h("span", { class: "muted" }, ` (${exit})`)),
    h("pre", { class: "terminal-output" }, t.truncated ? "…" : "", t.output),
  );
}

export function renderPlan(p: PlanBlock): HTMLElement {
  return h(
    "ol",
    { class: "plan", "data-testid": "plan" },
    ...p.entries.map((e) =>
      h("li", { "data-status": enumName(PlanEntryStatus, e.status) }, e.content, h("span", { class: "muted" }, ` (${enumName(PlanEntryStatus, e.status).replace("_", " ")})`)),
    ),
  );
}

function renderToolContent(c: ToolContent): HTMLElement | null {
  switch (c.content.case) {
    case "text":
      return h("pre", { class: "tool-text" }, c.content.value);
    case "diff":
      return renderDiff(c.content.value);
    case "terminal":
      return renderTerminal(c.content.value);
    case "image":
      return renderBlock({ content: { case: "image", value: c.content.value } } as Block);
    case "resource":
      return renderBlock({ content: { case: "resource", value: c.content.value } } as Block);
    default:
      return null;
  }
}

/** A tool call's current state. */
export function renderTool(tc: ToolCall): HTMLElement {
  const status = enumName(ToolStatus, tc.status).replace("_", " ");
  const kind = enumName(ToolKind, tc.kind);
  const el = h(
    "div",
    { class: "tool", "data-testid": "tool", "data-tool-id": tc.toolId, "data-status": enumName(ToolStatus, tc.status) },
    h(
      "div",
      { class: "tool-head" },
      h("span", { class: "tool-kind" }, kind),
      " ",
      h("span", { class: "tool-title" }, tc.title || tc.toolName || tc.toolId),
      " ",
      h("span", { class: `tool-status status-${enumName(ToolStatus, tc.status)}`, "data-testid": "tool-status" }, status),
    ),
  );
  if (tc.commandInfo !== undefined && tc.commandInfo.command !== "") {
    el.append(h("div", { class: "tool-command" }, h("code", {}, tc.commandInfo.command)));
  }
  if (tc.locations.length > 0) {
    el.append(h("div", { class: "tool-locations muted" }, tc.locations.map((l) => (l.line > 0 ? `${l.path}:${l.line}` : l.path)).join(", ")));
  }
  for (const c of tc.content) {
    const part = renderToolContent(c);
    if (part !== null) el.append(part);
  }
  if (tc.error !== "") {
    el.append(h("div", { class: "error" }, tc.error));
  }
  return el;
}

function imageSource(mime: string, src: { case: "url"; value: string } | { case: "data"; value: Uint8Array } | { case: undefined; value?: undefined }): string {
  if (src.case === "url") {
    // Only pictures: a javascript: or other URL is not followed.
    return /^(https?:|data:image\/)/i.test(src.value) ? src.value : "";
  }
  if (src.case === "data") {
    let bin = "";
    for (const b of src.value) bin += String.fromCharCode(b);
    return `data:${mime || "application/octet-stream"};base64,${btoa(bin)}`;
  }
  return "";
}

/** Any block other than text and reasoning, which the message view merges itself. */
export function renderBlock(b: Block): HTMLElement {
  const c = b.content;
  switch (c.case) {
    case "text":
      return h("div", { class: "text", "data-testid": "text" }, c.value.text);
    case "reasoning":
      return h("details", { class: "reasoning", "data-testid": "reasoning" }, h("summary", {}, "Reasoning"), h("div", {}, c.value.text));
    case "tool":
      return renderTool(c.value);
    case "plan":
      return renderPlan(c.value);
    case "diff":
      return renderDiff(c.value);
    case "terminal":
      return renderTerminal(c.value);
    case "error":
      return h("div", { class: "error", "data-testid": "error" }, c.value.message);
    case "image":
      return h("img", { class: "image", alt: "image from the agent", src: imageSource(c.value.mimeType, c.value.source) });
    case "action":
      return h("div", { class: "action muted" }, c.value.description || c.value.actionType);
    case "search":
      return h(
        "div",
        { class: "search" },
        h("div", { class: "muted" }, `search: ${c.value.query}`),
        h("ul", {}, ...c.value.results.map((r) => h("li", {}, r.title, " ", h("span", { class: "muted" }, r.url)))),
      );
    case "resource":
      return h("div", { class: "resource" }, h("div", { class: "muted" }, c.value.name || c.value.uri), c.value.text !== "" ? h("pre", {}, c.value.text) : null);
    case "mcpUiResource":
      // Shown as its source: a UI resource's HTML is not run inside this page.
      return h("div", { class: "resource" }, h("div", { class: "muted" }, c.value.uri), h("pre", {}, c.value.text));
    default:
      return h("div", { class: "muted" }, "(a part this page does not show)");
  }
}

/** Token counts and cost, as far as they were reported. */
export function usageText(u: TokenUsage | undefined): string {
  if (u === undefined) return "";
  const parts: string[] = [];
  if (u.inputTokens !== undefined) parts.push(`in ${u.inputTokens}`);
  if (u.outputTokens !== undefined) parts.push(`out ${u.outputTokens}`);
  if (u.totalTokens !== undefined) parts.push(`total ${u.totalTokens}`);
  if (u.cachedInputTokens !== undefined) parts.push(`cached ${u.cachedInputTokens}`);
  if (u.reasoningTokens !== undefined) parts.push(`reasoning ${u.reasoningTokens}`);
  if (u.contextUsed !== undefined) parts.push(`context ${u.contextUsed}${u.contextSize !== undefined ? `/${u.contextSize}` : ""}`);
  if (u.cost !== undefined) parts.push(`cost ${u.cost.toFixed(4)} ${u.costCurrency}`.trim());
  return parts.length > 0 ? `tokens: ${parts.join(", ")}` : "";
}
