// The plain JSON routes of the service, the event stream of a run already under way,
// and one way to turn any failure (HTTP status, network loss, a refused request from
// HttpAgent, a RUN_ERROR event) into a readable message in the page's language.

import { HttpAgent, type Interrupt, type Message } from "@ag-ui/client";
import { t } from "./i18n";
import { apiKey } from "./store";

export interface GraphInfo {
  id: string;
  description?: string;
}

/** Where the messages before a page of a thread continue (docs/api.md, "Reading a long thread"). */
export interface Older {
  /** The id to pass as `before` for the page before this one. */
  before: string;
  /** How many messages come before the page. */
  count: number;
}

/** A page of a thread: its latest messages (before a cursor) and every pending question. */
export interface ThreadPage {
  threadId: string;
  graphId: string | null;
  messages: Message[];
  interrupts: Interrupt[];
  older: Older | null;
}

export type RunStatus = "queued" | "running" | "interrupted" | "success" | "error" | "cancelled";

const RUN_STATUSES = new Set<string>(["queued", "running", "interrupted", "success", "error", "cancelled"]);

/** A thread as `GET /api/threads` lists it: the state of its latest run in `status`. */
export interface ThreadSummary {
  threadId: string;
  graphId: string;
  title: string;
  updatedAt: number; // ms since the epoch
  status: RunStatus | null;
  /** Where the thread was started: "terminal" (react-agent chat) or "api" (anything else). */
  origin: ThreadOrigin;
}

export type ThreadOrigin = "api" | "terminal";

/** A run as the server records it (`GET /api/threads/{id}/runs`). */
export interface RunRecord {
  runId: string;
  threadId: string;
  graph: string;
  status: RunStatus;
  createdAt: string;
  finishedAt: string | null;
  error: { code: string; message: string } | null;
}

export type FailureKind = "auth" | "conflict" | "refused" | "network" | "server";

export interface Failure {
  kind: FailureKind;
  status?: number;
  text: string;
}

/** An HTTP answer that was not 2xx; `payload` is the parsed JSON body when there was one. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly payload: unknown,
  ) {
    super(`HTTP ${status}`);
  }
}

/** `key` (by default the one this tab signed in with) as a bearer credential. */
export function authHeaders(key: string = apiKey.get()): Record<string, string> {
  return key ? { Authorization: `Bearer ${key}` } : {};
}

export function agentUrl(graphId: string): string {
  return `/api/agents/${encodeURIComponent(graphId)}`;
}

async function request(path: string, init: RequestInit = {}): Promise<Response> {
  const response = await fetch(path, {
    ...init,
    headers: { Accept: "application/json", ...authHeaders(), ...(init.headers ?? {}) },
  });
  if (!response.ok) {
    let payload: unknown = null;
    const text = await response.text();
    try {
      payload = JSON.parse(text);
    } catch {
      payload = text;
    }
    throw new HttpError(response.status, payload);
  }
  return response;
}

/** How the caller got in: a key, an identity provider's token, a trusted proxy's header,
 * or none needed (a server with no sign-in configured). */
export type Via = "key" | "token" | "proxy" | "open";

/** Who the server takes the caller to be (`GET /api/me`). */
export interface Me {
  userId: string;
  admin: boolean;
  via: Via;
}

const VIAS = new Set<string>(["key", "token", "proxy", "open"]);

/** Who `key` (by default this tab's) signs in as; HttpError 401 when the server refuses it. */
export async function whoAmI(key: string = apiKey.get()): Promise<Me> {
  const body: unknown = await (await request("/api/me", { headers: authHeaders(key) })).json();
  const v = (typeof body === "object" && body !== null ? body : {}) as Record<string, unknown>;
  return {
    userId: typeof v.userId === "string" ? v.userId : "",
    admin: v.admin === true,
    via: typeof v.via === "string" && VIAS.has(v.via) ? (v.via as Via) : "key",
  };
}

export async function listGraphs(): Promise<GraphInfo[]> {
  const body: unknown = await (await request("/api/graphs")).json();
  return Array.isArray(body)
    ? body.filter((g): g is GraphInfo => typeof g === "object" && g && typeof g.id === "string")
    : [];
}

function olderOf(value: unknown): Older | null {
  if (typeof value !== "object" || value === null) return null;
  const v = value as Record<string, unknown>;
  return typeof v.before === "string" && typeof v.count === "number" ? { before: v.before, count: v.count } : null;
}

/** The thread's latest messages (before message `before`, when given) and its pending
 * interrupts; null when the server does not know it. */
export async function getThread(threadId: string, before?: string): Promise<ThreadPage | null> {
  const query = before === undefined ? "" : `?${new URLSearchParams({ before })}`;
  try {
    const view = (await (
      await request(`/api/threads/${encodeURIComponent(threadId)}${query}`)
    ).json()) as ThreadPage;
    return {
      threadId: view.threadId ?? threadId,
      graphId: view.graphId ?? null,
      messages: Array.isArray(view.messages) ? view.messages : [],
      interrupts: Array.isArray(view.interrupts) ? view.interrupts : [],
      older: olderOf(view.older),
    };
  } catch (err) {
    if (err instanceof HttpError && err.status === 404) return null;
    throw err;
  }
}

function summaryOf(value: unknown): ThreadSummary | null {
  if (typeof value !== "object" || value === null) return null;
  const v = value as Record<string, unknown>;
  if (typeof v.threadId !== "string" || typeof v.graphId !== "string") return null;
  const updated = typeof v.updatedAt === "string" ? Date.parse(v.updatedAt) : NaN;
  return {
    threadId: v.threadId,
    graphId: v.graphId,
    title: typeof v.title === "string" ? v.title : "",
    updatedAt: Number.isFinite(updated) ? updated : 0,
    status: typeof v.status === "string" && RUN_STATUSES.has(v.status) ? (v.status as RunStatus) : null,
    origin: v.origin === "terminal" ? "terminal" : "api",
  };
}

/** The server's threads (of `graphId`, or of every agent), newest first. */
export async function listThreads(graphId: string | null, limit = 50): Promise<ThreadSummary[]> {
  const query = new URLSearchParams({ limit: String(limit) });
  if (graphId) query.set("graph", graphId);
  const body: unknown = await (await request(`/api/threads?${query}`)).json();
  return Array.isArray(body) ? body.map(summaryOf).filter((s): s is ThreadSummary => s !== null) : [];
}

/** Give a thread a new title; the server's summary of it comes back. */
export async function renameThread(threadId: string, title: string): Promise<ThreadSummary | null> {
  const response = await request(`/api/threads/${encodeURIComponent(threadId)}`, {
    method: "PATCH",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ title }),
  });
  return summaryOf(await response.json().catch(() => null));
}

function runsPath(threadId: string, runId?: string): string {
  const path = `/api/threads/${encodeURIComponent(threadId)}/runs`;
  return runId === undefined ? path : `${path}/${encodeURIComponent(runId)}`;
}

/** A run that has not ended yet: it holds the thread, or waits for it. */
export function isActive(run: RunRecord): boolean {
  return run.status === "queued" || run.status === "running";
}

/** The thread's runs, newest first; none when the server knows no runs of it. */
export async function listRuns(threadId: string): Promise<RunRecord[]> {
  try {
    const body: unknown = await (await request(runsPath(threadId))).json();
    return Array.isArray(body) ? (body as RunRecord[]) : [];
  } catch (err) {
    if (err instanceof HttpError && err.status === 404) return [];
    throw err;
  }
}

/** Ask the server to cancel a run; one that has already finished needs nothing more. */
export async function cancelRun(threadId: string, runId: string): Promise<void> {
  try {
    await request(`${runsPath(threadId, runId)}/cancel`, { method: "POST" });
  } catch (err) {
    const code = err instanceof HttpError ? (err.payload as { code?: unknown } | null)?.code : null;
    if (code === "run_finished") return;
    throw err;
  }
}

/** An agent that follows a run already under way: its whole event stream, from the start. */
export class RunStream extends HttpAgent {
  constructor(threadId: string, runId: string) {
    super({ url: `${runsPath(threadId, runId)}/stream`, headers: authHeaders(), threadId });
  }

  protected override requestInit(): RequestInit {
    return {
      method: "GET",
      headers: { ...this.headers, Accept: "text/event-stream" },
      signal: this.abortController.signal,
    };
  }
}

/** `keepalive`: the request outlives the page (a delete sent as the tab closes). */
export async function deleteThread(threadId: string, keepalive = false): Promise<void> {
  try {
    await request(`/api/threads/${encodeURIComponent(threadId)}`, { method: "DELETE", keepalive });
  } catch (err) {
    if (err instanceof HttpError && err.status === 404) return;
    throw err;
  }
}

/** The server's own words from an error body (`{"detail": ...}` and similar shapes). */
export function serverMessage(payload: unknown): string {
  if (typeof payload === "string") return payload.trim().slice(0, 500);
  if (typeof payload !== "object" || payload === null) return "";
  const body = payload as Record<string, unknown>;
  for (const key of ["detail", "message", "error"]) {
    const value = body[key];
    if (typeof value === "string") return value;
    if (Array.isArray(value)) {
      return value
        .map((item) =>
          typeof item === "object" && item && "msg" in item ? String(item.msg) : serverMessage(item),
        )
        .filter(Boolean)
        .join("；");
    }
    if (typeof value === "object" && value !== null) {
      const nested = serverMessage(value);
      if (nested) return nested;
    }
  }
  return "";
}

function statusOf(err: unknown): { status?: number; payload?: unknown } {
  if (err instanceof HttpError) return { status: err.status, payload: err.payload };
  if (typeof err === "object" && err !== null && "status" in err) {
    const e = err as { status?: unknown; payload?: unknown };
    if (typeof e.status === "number") return { status: e.status, payload: e.payload };
  }
  return {};
}

/** A readable description of `err`, whatever raised it. */
export function describeFailure(err: unknown): Failure {
  const { status, payload } = statusOf(err);
  if (status === undefined) {
    if (err instanceof TypeError || (err instanceof Error && /network|fetch|load failed/i.test(err.message))) {
      return { kind: "network", text: t.networkDown };
    }
    const message = err instanceof Error ? err.message : String(err);
    return { kind: "server", text: t.requestFailed(message) };
  }
  const said = serverMessage(payload);
  const suffix = t.said(said);
  // 401 only: signing in again helps; a 403 (an admin's route) is refused like any other.
  if (status === 401) return { kind: "auth", status, text: t.unauthorized(suffix) };
  if (status === 409) return { kind: "conflict", status, text: t.conflict(said) };
  if (status === 413) return { kind: "refused", status, text: t.tooLarge(suffix) };
  if (status >= 400 && status < 500) {
    return { kind: "refused", status, text: t.refused(said || `HTTP ${status}`) };
  }
  return { kind: "server", status, text: t.serverError(status, suffix) };
}

// RUN_ERROR codes whose text the page writes itself, in the page's language (the
// server's is Chinese, the same as the page's Chinese text); each gets its own text here.
// Other codes keep the server's message, which is written to be shown as it is.
const RUN_ERROR_TEXT: Record<string, (message: string) => string> = {
  model_not_configured: (message) => {
    // "模型未配置：需要设置环境变量 OPENAI_API_KEY（...）": the variable it names.
    const variable = /\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b/.exec(message)?.[0];
    return t.modelNotConfigured(variable ?? t.modelVariables);
  },
};

/** A readable description of a RUN_ERROR event, chosen by its `code`. */
export function describeRunError(code: string | undefined, message: string): Failure {
  const explain = code ? RUN_ERROR_TEXT[code] : undefined;
  return { kind: "server", text: t.runError(explain ? explain(message) : message) };
}
