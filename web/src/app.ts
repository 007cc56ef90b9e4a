// agenticd's web page: the agents, the sessions, a form to start one, and the open
// session (chat.ts). The open session lives in the URL hash (#/s/<session id>), so a
// reload or a shared link opens it again.
import { AgenticEventType } from "../../gen/ts/src/agentic/v1/events_pb.js";
import { SessionView } from "../../gen/ts/src/agentic/v1/service_pb.js";
import { AgentStatus, SessionStatus } from "../../gen/ts/src/agentic/v1/types_pb.js";
import type { AgentInfo, SessionInfo } from "../../gen/ts/src/agentic/v1/types_pb.js";
import { client, describe, isNetworkError, isTokenError, setToken, signedIn, uuid } from "./api.js";
import { ChatView } from "./chat.js";
import { back, lost, retryDelay } from "./connection.js";
import { byId, enumName, h } from "./dom.js";
import { notifyWaiting } from "./notify.js";

const workspaceKey = "agenticd.workspace";

const agentsList = byId("agents");
const sessionsList = byId("sessions");
const newSession = byId<HTMLFormElement>("new-session");
const newAgent = byId<HTMLSelectElement>("new-agent");
const newWorkspace = byId<HTMLInputElement>("new-workspace");
const newTitle = byId<HTMLInputElement>("new-title");
const newError = byId("new-session-error");
const tokenForm = byId<HTMLFormElement>("token-form");
const tokenInput = byId<HTMLInputElement>("token-input");
const pageError = byId("page-error");

const agents = new Map<string, AgentInfo>();

// Everyone waiting for a token is answered by the one form.
let tokenWaiters: Array<() => void> = [];

function askToken(): Promise<void> {
  tokenForm.hidden = false;
  tokenInput.focus();
  // The server answers 204 here when it signs browsers in through an OpenID issuer.
  void fetch("/login/oidc", { method: "HEAD", redirect: "manual" })
    .then((r) => {
      byId("oidc-sign-in").hidden = r.status !== 204;
    })
    .catch(() => undefined);
  return new Promise((resolve) => tokenWaiters.push(resolve));
}

tokenForm.addEventListener("submit", (e) => {
  e.preventDefault();
  setToken(tokenInput.value.trim());
  tokenInput.value = "";
  tokenForm.hidden = true;
  const waiters = tokenWaiters;
  tokenWaiters = [];
  for (const w of waiters) w();
});

const chat = new ChatView(
  askToken,
  () => scheduleSessions(),
  () => {
    location.hash = "";
    scheduleSessions();
  },
);

// Where a session may work, as a hint under the workspace field and as suggestions.
function renderRoots(roots: string[]): void {
  const hint = byId("workspace-roots");
  byId("workspace-suggestions").replaceChildren(...roots.map((r) => h("option", { value: r })));
  if (roots.length === 0) {
    hint.replaceChildren();
    return;
  }
  const links = roots.map((r) => {
    const b = h("button", { type: "button", class: "link", "data-testid": "workspace-root", "data-root": r }, r);
    b.addEventListener("click", () => {
      newWorkspace.value = r.endsWith("/") ? r : `${r}/`;
      newWorkspace.focus();
    });
    return b;
  });
  hint.replaceChildren("Allowed under: ", ...links.flatMap((l, i) => (i === 0 ? [l] : [", ", l])));
}

function renderAgents(): void {
  const sorted = [...agents.values()].sort((a, b) => a.agentId.localeCompare(b.agentId));
  agentsList.replaceChildren(
    ...sorted.map((a) =>
      h(
        "li",
        { "data-testid": "agent", "data-agent-id": a.agentId, "data-status": enumName(AgentStatus, a.status) },
        h("span", { class: "agent-name" }, a.name || a.agentId),
        " ",
        h("span", { class: `badge status-${enumName(AgentStatus, a.status)}` }, enumName(AgentStatus, a.status).replace("_", " ")),
        h("div", { class: "muted small" }, a.agentId, a.statusReason !== "" ? ` — ${a.statusReason}` : ""),
      ),
    ),
  );
  const chosen = newAgent.value;
  newAgent.replaceChildren(...sorted.map((a) => h("option", { value: a.agentId }, `${a.name || a.agentId} (${enumName(AgentStatus, a.status).replace("_", " ")})`)));
  if (chosen !== "" && agents.has(chosen)) newAgent.value = chosen;
}

function renderSessions(sessions: SessionInfo[]): void {
  const open = chat.openSession;
  sessionsList.replaceChildren(
    ...sessions.map((s) => {
      const status = enumName(SessionStatus, s.status);
      return h(
        "li",
        {},
        h(
          "a",
          { href: `#/s/${encodeURIComponent(s.sessionId)}`, "data-testid": "session-link", "data-session-id": s.sessionId, "aria-current": s.sessionId === open ? "page" : undefined },
          h("span", { class: "session-title" }, s.title || s.sessionId),
          " ",
          h("span", { class: `badge status-${status}`, "data-testid": "session-status" }, status),
          h("div", { class: "muted small" }, s.agentId, " · ", s.workspace),
        ),
      );
    }),
  );
}

async function loadAgents(): Promise<void> {
  const resp = await client.listAgents({});
  agents.clear();
  for (const a of resp.agents) agents.set(a.agentId, a);
  renderAgents();
}

const sessionTitles = new Map<string, string>();

async function loadSessions(): Promise<void> {
  // The server lists the most recently updated first.
  const resp = await client.listSessions({ view: SessionView.BASIC });
  for (const s of resp.sessions) sessionTitles.set(s.sessionId, s.title || s.sessionId);
  renderSessions(resp.sessions);
}

let sessionsTimer = 0;
function scheduleSessions(): void {
  clearTimeout(sessionsTimer);
  sessionsTimer = window.setTimeout(() => {
    loadSessions().catch(reportError);
  }, 200);
}

function reportError(err: unknown): void {
  if (isTokenError(err)) {
    void askToken().then(() => start());
    return;
  }
  pageError.textContent = describe(err);
}

newWorkspace.value = localStorage.getItem(workspaceKey) ?? "";
newSession.addEventListener("submit", (e) => {
  e.preventDefault();
  void (async () => {
    const button = byId<HTMLButtonElement>("create-session");
    button.disabled = true;
    newError.textContent = "";
    try {
      const workspace = newWorkspace.value.trim();
      const { session } = await client.createSession({
        agentId: newAgent.value,
        config: { workspace, title: newTitle.value.trim() },
        requestId: uuid(),
      });
      localStorage.setItem(workspaceKey, workspace);
      newTitle.value = "";
      if (session !== undefined) {
        location.hash = `#/s/${encodeURIComponent(session.sessionId)}`;
        byId("message-input").focus();
      }
      scheduleSessions();
    } catch (err) {
      if (isTokenError(err)) {
        await askToken();
      } else {
        newError.textContent = describe(err);
      }
    } finally {
      button.disabled = false;
    }
  })();
});

function route(): void {
  const m = /^#\/s\/(.+)$/.exec(location.hash);
  const id = m !== null ? decodeURIComponent(m[1]) : "";
  chat.open(id);
  for (const a of sessionsList.querySelectorAll<HTMLElement>("[data-testid=session-link]")) {
    if (a.dataset.sessionId === id) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}
window.addEventListener("hashchange", route);

// Agents' and sessions' changes arrive on a live stream of those event types; a dropped
// stream is opened again and the lists re-read, so nothing between is missed.
// Permission requests and forms of every session come too: the person is told of them
// when the tab is hidden.
async function watch(): Promise<void> {
  for (let failures = 0; ; failures++) {
    let why = "the server ended the event stream";
    try {
      const frames = client.subscribe({
        types: [
          AgenticEventType.SESSION_CREATED,
          AgenticEventType.SESSION_UPDATED,
          AgenticEventType.SESSION_CLOSED,
          AgenticEventType.STATUS_CHANGED,
          AgenticEventType.AGENT_STATUS_CHANGED,
          AgenticEventType.TOOL_PERMISSION_REQUIRED,
          AgenticEventType.ELICITATION_REQUIRED,
        ],
      });
      for await (const frame of frames) {
        if (frame.frame.case === "caughtUp") {
          failures = 0;
          await Promise.all([loadAgents(), loadSessions()]);
          pageError.textContent = "";
          back("page");
        }
        if (frame.frame.case !== "events") continue;
        for (const ev of frame.frame.value.events) {
          const p = ev.payload;
          if (p.case === "agentStatusChanged" && p.value.agent !== undefined) {
            agents.set(p.value.agent.agentId, p.value.agent);
            renderAgents();
          } else if (p.case === "toolPermissionRequired" || p.case === "elicitationRequired") {
            const what = p.case === "toolPermissionRequired" ? p.value.request?.description || "A tool call waits for permission" : p.value.request?.message || "The agent asks for input";
            const open = () => {
              location.hash = `#/s/${encodeURIComponent(ev.sessionId)}`;
            };
            notifyWaiting(`agenticd: ${sessionTitles.get(ev.sessionId) ?? ev.sessionId}`, what, `${ev.sessionId}/${ev.sequence}`, open);
          } else {
            scheduleSessions();
          }
        }
      }
    } catch (err) {
      if (isTokenError(err)) {
        await askToken();
        continue;
      }
      why = describe(err);
    }
    lost("page", why);
    await new Promise((r) => setTimeout(r, retryDelay(failures)));
  }
}

let started = false;
async function start(): Promise<void> {
  for (let failures = 1; ; failures++) {
    try {
      const info = await client.getServerInfo({});
      const hb = info.limits?.heartbeatInterval;
      if (hb !== undefined) chat.setHeartbeat(Number(hb.seconds) * 1000 + Math.floor(hb.nanos / 1e6));
      byId("server-version").textContent = info.version;
      signedIn.principal = info.caller?.principal ?? "";
      byId("signed-in").textContent = signedIn.principal !== "" ? `signed in as ${signedIn.principal}` : "";
      renderRoots(info.workspaceRoots);
      pageError.textContent = "";
      back("start");
      break;
    } catch (err) {
      // A server that is not up yet is waited for; any other answer is shown.
      if (!isNetworkError(err)) {
        reportError(err);
        return;
      }
      lost("start", describe(err));
      await new Promise((r) => setTimeout(r, retryDelay(failures)));
    }
  }
  if (started) return;
  started = true;
  route();
  void watch();
}

void start();
