// Small DOM helpers. Everything an agent or a server sends becomes text nodes, never
// markup, so nothing it says can run in the page.

type Attrs = Record<string, string | boolean | undefined>;
type Child = Node | string | null | undefined | false;

/** An element with attributes (true: present, false/undefined: absent) and children. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === true) {
      el.setAttribute(name, "");
    } else if (typeof value === "string") {
      el.setAttribute(name, value);
    }
  }
  for (const c of children) {
    if (c !== null && c !== undefined && c !== false) {
      el.append(c);
    }
  }
  return el;
}

export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (el === null) {
    throw new Error(`index.html has no element #${id}`);
  }
  return el as T;
}

/** Enum value names without their prefix, lower case: SessionStatus.IDLE -> "idle". */
export function enumName(e: Record<number, string>, value: number): string {
  return (e[value] ?? String(value)).toLowerCase();
}
