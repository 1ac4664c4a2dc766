import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import {
  apiKey,
  currentThread,
  forgetStoredKey,
  forgetThreads,
  keepThreadsOf,
  lastGraph,
  loadThreads,
  saveThreads,
  threadsOwner,
} from "../src/store";

/** A Storage as the browser's, in memory (the tests run in Node, which has none). */
class MemoryStorage implements Storage {
  private readonly items = new Map<string, string>();
  get length(): number {
    return this.items.size;
  }
  clear(): void {
    this.items.clear();
  }
  getItem(key: string): string | null {
    return this.items.get(key) ?? null;
  }
  key(index: number): string | null {
    return [...this.items.keys()][index] ?? null;
  }
  removeItem(key: string): void {
    this.items.delete(key);
  }
  setItem(key: string, value: string): void {
    this.items.set(key, value);
  }
}

const KEY = "react-agent.apiKey";
let local: MemoryStorage;
let session: MemoryStorage;

beforeEach(() => {
  local = new MemoryStorage();
  session = new MemoryStorage();
  vi.stubGlobal("localStorage", local);
  vi.stubGlobal("sessionStorage", session);
});

afterEach(() => {
  vi.unstubAllGlobals();
});

describe("the API key", () => {
  it("is kept for the tab only, never where it would outlive it", () => {
    apiKey.set("  s3cret-key ");
    expect(apiKey.get()).toBe("s3cret-key");
    expect(session.getItem(KEY)).toBe("s3cret-key");
    expect(local.getItem(KEY)).toBeNull();

    apiKey.set("");
    expect(session.getItem(KEY)).toBeNull();
  });

  it("a key an older page left in localStorage is moved out of it on load, into the tab", () => {
    local.setItem(KEY, "old-key");
    forgetStoredKey();
    expect(local.getItem(KEY)).toBeNull();
    expect(apiKey.get()).toBe("old-key");
  });

  it("a key the tab has already stays, and the stored one is removed all the same", () => {
    session.setItem(KEY, "tab-key");
    local.setItem(KEY, "old-key");
    forgetStoredKey();
    expect(apiKey.get()).toBe("tab-key");
    expect(local.getItem(KEY)).toBeNull();
  });

  it("is simply absent where the browser refuses storage", () => {
    vi.stubGlobal("sessionStorage", undefined);
    apiKey.set("k");
    expect(apiKey.get()).toBe("");
  });
});

describe("what the browser remembers", () => {
  it("outlives the tab: the last agent stays in localStorage", () => {
    lastGraph.set("weather");
    expect(local.getItem("react-agent.graph")).toBe("weather");
    expect(session.length).toBe(0);
  });
});

describe("whose cached thread list it is", () => {
  const entry = { id: "t-1", graphId: "weather", title: "alice's plans", updatedAt: 1 };

  it("the list cached for one user is dropped when another signs in, with the open thread", () => {
    keepThreadsOf("alice");
    saveThreads([entry]);
    currentThread.set("t-1");

    keepThreadsOf("bob");
    expect(loadThreads()).toEqual([]);
    expect(currentThread.get()).toBeNull();
    expect(threadsOwner()).toBe("bob");
  });

  it("the same user signing in again keeps the list and the open thread", () => {
    keepThreadsOf("alice");
    saveThreads([entry]);
    currentThread.set("t-1");

    keepThreadsOf("alice");
    expect(loadThreads()).toEqual([entry]);
    expect(currentThread.get()).toBe("t-1");
  });

  it("a list cached before users existed belongs to nobody: the first sign-in drops it", () => {
    saveThreads([entry]);
    keepThreadsOf("alice");
    expect(loadThreads()).toEqual([]);
  });

  it("signing out forgets the list, the open thread and whose they were; the agent stays", () => {
    keepThreadsOf("alice");
    saveThreads([entry]);
    currentThread.set("t-1");
    lastGraph.set("tushare");

    forgetThreads();
    expect(loadThreads()).toEqual([]);
    expect(currentThread.get()).toBeNull();
    expect(threadsOwner()).toBeNull();
    expect(lastGraph.get()).toBe("tushare");
  });
});
