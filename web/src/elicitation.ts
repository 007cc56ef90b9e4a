// An agent's request for input: a form built from its JSON Schema (primitive fields, as
// MCP elicitation schemas have them), or a URL to open. The server checks the answer
// against the schema and names a wrong field; the form shows that next to the field.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { ElicitationAction, ElicitationMode } from "../../gen/ts/src/agentic/v1/types_pb.js";
import type { ElicitationRequest } from "../../gen/ts/src/agentic/v1/types_pb.js";
import { h } from "./dom.js";

/** Sends the answer; resolves with an error text ("" when accepted by the server). */
export type Answer = (action: ElicitationAction, content: JsonObject | undefined) => Promise<string>;

interface Field {
  name: string;
  read: () => JsonValue | undefined;
}

function asObject(v: JsonValue | undefined): JsonObject {
  return v !== null && typeof v === "object" && !Array.isArray(v) ? v : {};
}

function strings(v: JsonValue | undefined): string[] {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];
}

function field(name: string, prop: JsonObject, required: boolean, formId: string): { el: HTMLElement; field: Field } {
  const id = `${formId}-${name}`;
  const title = typeof prop.title === "string" && prop.title !== "" ? prop.title : name;
  const description = typeof prop.description === "string" ? prop.description : "";
  const type = typeof prop.type === "string" ? prop.type : "string";
  const def = prop.default;
  const label = h("label", { for: id }, title, required ? " *" : "");
  const hint = description !== "" ? h("div", { class: "muted small" }, description) : null;
  const wrap = (input: HTMLElement) => h("div", { class: "elicitation-field", "data-field": name }, label, input, hint);

  const choices = strings(prop.enum);
  if (type === "boolean") {
    const input = h("input", { id, type: "checkbox", name, checked: def === true });
    return { el: h("div", { class: "elicitation-field", "data-field": name }, h("label", { class: "check" }, input, ` ${title}`), hint), field: { name, read: () => input.checked } };
  }
  if (type === "array") {
    const options = strings(asObject(prop.items).enum);
    const defaults = strings(def);
    const boxes = options.map((o) => h("input", { type: "checkbox", name, value: o, checked: defaults.includes(o) }));
    const group = h("fieldset", { id }, h("legend", {}, title, required ? " *" : ""), ...boxes.map((b, i) => h("label", { class: "check" }, b, ` ${options[i]}`)), hint);
    return { el: h("div", { class: "elicitation-field", "data-field": name }, group), field: { name, read: () => boxes.filter((b) => b.checked).map((b) => b.value) } };
  }
  if (choices.length > 0) {
    const names = strings(prop.enumNames);
    const select = h("select", { id, name, required }, required ? null : h("option", { value: "" }, "—"), ...choices.map((c, i) => h("option", { value: c }, names[i] ?? c)));
    if (typeof def === "string") select.value = def;
    return { el: wrap(select), field: { name, read: () => (select.value === "" ? undefined : select.value) } };
  }
  if (type === "number" || type === "integer") {
    const input = h("input", { id, name, type: "number", required, step: type === "integer" ? "1" : "any" });
    if (typeof prop.minimum === "number") input.min = String(prop.minimum);
    if (typeof prop.maximum === "number") input.max = String(prop.maximum);
    if (typeof def === "number") input.value = String(def);
    return { el: wrap(input), field: { name, read: () => (input.value === "" ? undefined : Number(input.value)) } };
  }
  const formats: Record<string, string> = { email: "email", uri: "url", date: "date", "date-time": "datetime-local" };
  const input = h("input", { id, name, type: formats[typeof prop.format === "string" ? prop.format : ""] ?? "text", required });
  if (typeof prop.minLength === "number") input.minLength = prop.minLength;
  if (typeof prop.maxLength === "number") input.maxLength = prop.maxLength;
  if (typeof def === "string") input.value = def;
  return { el: wrap(input), field: { name, read: () => (input.value === "" ? undefined : input.value) } };
}

/** A card for one pending elicitation. */
export function renderElicitation(r: ElicitationRequest, answer: Answer): HTMLElement {
  const formId = `elicit-${r.elicitationId.replace(/[^A-Za-z0-9_-]/g, "_")}`;
  const error = h("p", { class: "error", role: "alert", "data-testid": "elicitation-error" });
  const buttons: HTMLButtonElement[] = [];
  const button = (text: string, action: ElicitationAction, type: "submit" | "button") => {
    const b = h("button", { type, "data-testid": "elicitation-action", "data-action": ElicitationAction[action].toLowerCase() }, text);
    buttons.push(b);
    return b;
  };
  const send = async (action: ElicitationAction, content: JsonObject | undefined) => {
    for (const b of buttons) b.disabled = true;
    error.textContent = "";
    const failed = await answer(action, content);
    for (const b of buttons) b.disabled = false;
    error.textContent = failed;
  };

  const form = h("form", { class: "elicitation", id: formId, "data-testid": "elicitation", "data-elicitation-id": r.elicitationId, "data-message-id": r.messageId, "aria-label": "the agent asks for input" },
    h("div", { class: "elicitation-title" }, r.message || "The agent asks for input"));
  const fields: Field[] = [];
  if (r.mode === ElicitationMode.URL) {
    // Only web addresses are offered as links.
    const safe = /^https?:\/\//i.test(r.url);
    form.append(safe ? h("a", { href: r.url, target: "_blank", rel: "noopener noreferrer", "data-testid": "elicitation-url" }, r.url) : h("code", {}, r.url));
  } else {
    const schema = r.requestedSchema ?? {};
    const required = strings(schema.required);
    for (const [name, prop] of Object.entries(asObject(schema.properties))) {
      const f = field(name, asObject(prop), required.includes(name), formId);
      form.append(f.el);
      fields.push(f.field);
    }
  }
  form.append(
    error,
    h("div", { class: "elicitation-actions" }, button(r.mode === ElicitationMode.URL ? "Done" : "Submit", ElicitationAction.ACCEPT, "submit"), button("Decline", ElicitationAction.DECLINE, "button"), button("Cancel", ElicitationAction.CANCEL, "button")),
  );
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    if (r.mode === ElicitationMode.URL) {
      void send(ElicitationAction.ACCEPT, undefined);
      return;
    }
    const content: JsonObject = {};
    for (const f of fields) {
      const v = f.read();
      if (v !== undefined) content[f.name] = v;
    }
    void send(ElicitationAction.ACCEPT, content);
  });
  for (const b of buttons.slice(1)) {
    b.addEventListener("click", () => void send(b.dataset.action === "decline" ? ElicitationAction.DECLINE : ElicitationAction.CANCEL, undefined));
  }
  return form;
}
