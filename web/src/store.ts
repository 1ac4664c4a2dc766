// What the browser remembers (localStorage): the thread list, the open thread, the last
// picked agent and the API key. The conversation itself lives on the server.

export interface ThreadEntry {
  id: string;
  graphId: string;
  title: string;
  updatedAt: number;
}

const KEYS = {
  threads: "react-agent.threads",
  current: "react-agent.current",
  graph: "react-agent.graph",
  apiKey: "react-agent.apiKey",
} as const;

function read(key: string): string | null {
  try {
    return localStorage.getItem(key);
  } catch {
    return null; // storage disabled (private mode, policy): behave as empty
  }
}

function write(key: string, value: string | null): void {
  try {
    if (value === null) localStorage.removeItem(key);
    else localStorage.setItem(key, value);
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

export const currentThread = {
  get: (): string | null => read(KEYS.current),
  set: (id: string | null): void => write(KEYS.current, id),
};

export const lastGraph = {
  get: (): string | null => read(KEYS.graph),
  set: (id: string): void => write(KEYS.graph, id),
};

export const apiKey = {
  get: (): string => read(KEYS.apiKey) ?? "",
  set: (key: string): void => write(KEYS.apiKey, key.trim() || null),
};
