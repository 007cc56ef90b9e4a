// Agents answer in Markdown: it is rendered here, with code blocks highlighted, and the
// result sanitized before it reaches the page. Raw HTML in the source is not rendered
// (html: false shows it as text); DOMPurify is the second wall, for whatever the
// renderer lets through (attributes, URLs).
import DOMPurify from "dompurify";
import hljs from "highlight.js/lib/core";
import bash from "highlight.js/lib/languages/bash";
import diff from "highlight.js/lib/languages/diff";
import go from "highlight.js/lib/languages/go";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";
import python from "highlight.js/lib/languages/python";
import typescript from "highlight.js/lib/languages/typescript";
import yaml from "highlight.js/lib/languages/yaml";
import MarkdownIt from "markdown-it";

// A few languages keep the bundle small; others show as plain code.
for (const [name, lang] of Object.entries({ bash, diff, go, javascript, json, python, typescript, yaml })) {
  hljs.registerLanguage(name, lang);
}

const md = new MarkdownIt({
  html: false,
  linkify: false,
  highlight(code: string, lang: string): string {
    const language = lang.trim().toLowerCase();
    if (language === "" || hljs.getLanguage(language) === undefined) return "";
    return hljs.highlight(code, { language, ignoreIllegals: true }).value;
  },
});

// Links open elsewhere, without handing this page to the target.
DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node instanceof HTMLAnchorElement && node.hasAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

/** Markdown source as sanitized elements. */
export function markdownFragment(source: string): DocumentFragment {
  const frag = DOMPurify.sanitize(md.render(source), { RETURN_DOM_FRAGMENT: true });
  // The renderer puts a line break between blocks; as text nodes they would only add
  // stray whitespace to the text a reader copies.
  for (const n of [...frag.childNodes]) {
    if (n.nodeType === Node.TEXT_NODE && (n.textContent ?? "").trim() === "") n.remove();
  }
  return frag;
}

/** One Markdown text part of a message, growing as deltas arrive. */
export class MarkdownPart {
  readonly el: HTMLElement;
  private source = "";

  constructor(el: HTMLElement) {
    this.el = el;
  }

  append(text: string): void {
    this.source += text;
    schedule(this);
  }

  render(): void {
    this.el.replaceChildren(markdownFragment(this.source));
  }
}

// Parts that changed are rendered once per batch of events (a microtask after them),
// not once per delta: a long reply streams as many small deltas.
const dirty = new Set<MarkdownPart>();
let scheduled = false;
let rendered: () => void = () => {};

function schedule(p: MarkdownPart): void {
  dirty.add(p);
  if (!scheduled) {
    scheduled = true;
    queueMicrotask(flushMarkdown);
  }
}

/** Calls f after each batch of parts was rendered (the view may then scroll). */
export function onMarkdownRendered(f: () => void): void {
  rendered = f;
}

/** Renders what changed now. */
export function flushMarkdown(): void {
  scheduled = false;
  if (dirty.size === 0) return;
  for (const p of dirty) p.render();
  dirty.clear();
  rendered();
}
