// What the browser remembers (localStorage): the last thread list it saw (the server's
// list replaces it as soon as it answers) and whose it was, the open thread, the last
// picked agent and how charts are drawn. The conversations themselves live on the server.
// The key or token signed in with is the tab's only (sessionStorage): it is gone when the
// tab closes, and never written where it would persist; a key an older page left in
// localStorage is moved out on load.

import type { ThreadOrigin } from "./api";

/** The state a thread's latest run left it in, as the sidebar's badge shows it. */
export type ThreadStatus = "running" | "waiting" | "stopped" | "failed" | null;

export interface ThreadEntry {
  id: string;
  graphId: string;
  title: string;
  updatedAt: number;
  status?: ThreadStatus;
  origin?: ThreadOrigin;
}

const KEYS = {
  threads: "react-agent.threads",
  current: "react-agent.current",
  graph: "react-agent.graph",
  apiKey: "react-agent.apiKey",
  owner: "react-agent.owner",
} as const;

/** The storage that outlives the tab, or the tab's own; null when the browser refuses it. */
function storage(kind: "localStorage" | "sessionStorage"): Storage | null {
  try {
    return globalThis[kind] ?? null;
  } catch {
    return null; // storage disabled (private mode, policy): behave as empty
  }
}

function read(key: string, where: Storage | null = storage("localStorage")): string | null {
  try {
    return where?.getItem(key) ?? null;
  } catch {
    return null; // storage disabled (private mode, policy): behave as empty
  }
}

function write(key: string, value: string | null, where: Storage | null = storage("localStorage")): void {
  try {
    if (value === null) where?.removeItem(key);
    else where?.setItem(key, value);
  } catch {
    // Quota or policy: the page still works, it just forgets on reload.
  }
}

function isEntry(value: unknown): value is ThreadEntry {
  if (typeof value !== "object" || value === null) return false;
  const v = value as Record<string, unknown>;
  return (
    typeof v.id === "string" &&
    typeof v.graphId === "string" &&
    typeof v.title === "string" &&
    typeof v.updatedAt === "number"
  );
}

export function loadThreads(): ThreadEntry[] {
  try {
    const parsed: unknown = JSON.parse(read(KEYS.threads) ?? "[]");
    return Array.isArray(parsed) ? parsed.filter(isEntry) : [];
  } catch {
    return [];
  }
}

export function saveThreads(threads: ThreadEntry[]): void {
  write(KEYS.threads, JSON.stringify(threads));
}

/** The cached thread list and open thread are `userId`'s from now on: another user's are
 * dropped (a browser shared by two people shows neither the other's titles). */
export function keepThreadsOf(userId: string): void {
  if (read(KEYS.owner) === userId) return;
  forgetThreads();
  write(KEYS.owner, userId);
}

/** Whose the cached thread list is; null when nobody's is known. */
export function threadsOwner(): string | null {
  return read(KEYS.owner);
}

/** Drop the cached thread list, the open thread and whose they were (signing out). */
export function forgetThreads(): void {
  for (const key of [KEYS.threads, KEYS.current, KEYS.owner]) write(key, null);
}

export const currentThread = {
  get: (): string | null => read(KEYS.current),
  set: (id: string | null): void => write(KEYS.current, id),
};

export const lastGraph = {
  get: (): string | null => read(KEYS.graph),
  set: (id: string): void => write(KEYS.graph, id),
};

export const apiKey = {
  get: (): string => read(KEYS.apiKey, storage("sessionStorage")) ?? "",
  set: (key: string): void => write(KEYS.apiKey, key.trim() || null, storage("sessionStorage")),
};

/** Take a key an older page kept in localStorage out of it (any script of the origin could
 * read it there, for good): this tab keeps it, unless it has one of its own already. */
export function forgetStoredKey(): void {
  const left = read(KEYS.apiKey);
  if (left === null) return;
  if (!apiKey.get()) apiKey.set(left);
  write(KEYS.apiKey, null);
}

/** How candlestick charts are drawn: the up/down colours and which moving averages show. */
export interface ChartPrefs {
  /** true: red up, green down (the Chinese convention); false: green up, red down. */
  redUp: boolean;
  ma: number[];
}

const CHART_DEFAULTS: ChartPrefs = { redUp: true, ma: [5, 10, 20] };

export const chartPrefs = {
  get: (): ChartPrefs => {
    try {
      const parsed: unknown = JSON.parse(read("react-agent.chart") ?? "null");
      if (typeof parsed !== "object" || parsed === null) return CHART_DEFAULTS;
      const p = parsed as Record<string, unknown>;
      return {
        redUp: typeof p.redUp === "boolean" ? p.redUp : CHART_DEFAULTS.redUp,
        ma: Array.isArray(p.ma) ? p.ma.filter((n): n is number => typeof n === "number") : CHART_DEFAULTS.ma,
      };
    } catch {
      return CHART_DEFAULTS;
    }
  },
  set: (prefs: ChartPrefs): void => write("react-agent.chart", JSON.stringify(prefs)),
};
