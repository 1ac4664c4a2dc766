import { describe, expect, it } from "vitest";
import type { ThreadSummary } from "../src/api";
import type { ThreadEntry } from "../src/store";
import { badgeOf, LOCAL_STATUS_MS, NEW_THREAD_GRACE_MS, Threads } from "../src/threads";

const NOW = 1_800_000_000_000;

function summary(threadId: string, extra: Partial<ThreadSummary> = {}): ThreadSummary {
  return { threadId, graphId: "weather", title: `title ${threadId}`, updatedAt: NOW - 1000, status: "success", origin: "api", ...extra };
}

function entry(id: string, extra: Partial<ThreadEntry> = {}): ThreadEntry {
  return { id, graphId: "weather", title: `local ${id}`, updatedAt: NOW - 5000, ...extra };
}

describe("the server's thread list", () => {
  it("names the threads: one it does not list is gone, one it lists is added", () => {
    const threads = new Threads([entry("a"), entry("deleted-elsewhere")]);
    threads.merge([summary("a"), summary("made-elsewhere", { status: "interrupted" })], NOW, NOW);
    expect(threads.entries.map((e) => e.id)).toEqual(["a", "made-elsewhere"]);
    expect(threads.known("made-elsewhere")).toMatchObject({ title: "title made-elsewhere", status: "waiting" });
  });

  it("takes a title the server gave later (the model's) and where the thread was started", () => {
    const threads = new Threads([entry("a", { title: "查天气" })]);
    threads.merge([summary("a", { title: "北京明天天气", origin: "terminal" })], NOW, NOW);
    expect(threads.known("a")).toMatchObject({ title: "北京明天天气", origin: "terminal" });
  });

  it("updates the open thread's own entry in place, keeping a title the server has not given yet", () => {
    const open = entry("a", { updatedAt: NOW });
    const threads = new Threads([open]);
    threads.current = open;
    threads.merge([summary("a", { title: "", graphId: "tushare", updatedAt: NOW - 9000 })], NOW, NOW);
    expect(threads.entries[0]).toBe(open);
    expect(open).toMatchObject({ title: "local a", graphId: "tushare", updatedAt: NOW });
  });

  it("keeps a thread this page started until the server lists it, for a grace period only", () => {
    const threads = new Threads([]);
    threads.current = entry("new");
    threads.touch(NOW);
    threads.merge([], NOW, NOW + NEW_THREAD_GRACE_MS - 1);
    expect(threads.entries.map((e) => e.id)).toEqual(["new"]);
    threads.merge([], NOW, NOW + NEW_THREAD_GRACE_MS);
    expect(threads.entries).toEqual([]);
  });

  it("once listed, a started thread is no longer kept when a later list leaves it out", () => {
    const threads = new Threads([]);
    threads.current = entry("new");
    threads.touch(NOW);
    threads.merge([summary("new")], NOW, NOW);
    threads.merge([], NOW + 10, NOW + 10);
    expect(threads.entries).toEqual([]);
  });

  it("does not overwrite a state this page saw itself after the list was asked for", () => {
    const threads = new Threads([entry("a")]);
    threads.setStatus("a", "stopped", NOW);
    threads.merge([summary("a", { status: "running" })], NOW - LOCAL_STATUS_MS + 1, NOW);
    expect(threads.known("a")?.status).toBe("stopped");
    threads.merge([summary("a", { status: "running" })], NOW + LOCAL_STATUS_MS + 1, NOW + 2 * LOCAL_STATUS_MS);
    expect(threads.known("a")?.status).toBe("running");
  });
});

describe("a thread's state", () => {
  it("reports a change of badge only when it changes", () => {
    const threads = new Threads([entry("a")]);
    expect(threads.setStatus("a", "running", NOW)).toBe(true);
    expect(threads.setStatus("a", "running", NOW)).toBe(false);
    expect(threads.setStatus("unknown", "running", NOW)).toBe(false);
  });

  it("of a draft is kept on the draft itself", () => {
    const threads = new Threads([]);
    threads.current = entry("draft");
    expect(threads.setStatus("draft", "waiting", NOW)).toBe(true);
    expect(threads.current.status).toBe("waiting");
  });

  it("follows the latest run: running while queued or running, waiting on a question, none after success", () => {
    expect(["queued", "running", "interrupted", "cancelled", "error", "success", null].map((s) => badgeOf(s as never))).toEqual(
      ["running", "running", "waiting", "stopped", "failed", null, null],
    );
  });
});

describe("activity on the open thread", () => {
  it("moves it up, adds a draft to the list once, and forgetting it takes it off", () => {
    const threads = new Threads([entry("old")]);
    threads.current = entry("draft");
    expect(threads.touch(NOW)?.updatedAt).toBe(NOW);
    threads.touch(NOW + 1);
    expect(threads.entries.map((e) => e.id)).toEqual(["old", "draft"]);
    threads.forget("draft");
    threads.merge([], NOW + 2, NOW + 2);
    expect(threads.entries).toEqual([]);
  });

  it("without an open thread changes nothing", () => {
    const threads = new Threads([entry("old")]);
    expect(threads.touch(NOW)).toBeNull();
    expect(threads.entries.map((e) => e.id)).toEqual(["old"]);
  });
});

describe("a thread deleted with an undo", () => {
  it("stays out of the list while the server still lists it, and comes back as it was on restore", () => {
    const threads = new Threads([entry("a"), entry("b", { title: "kept title" })]);
    threads.hide("b");
    threads.merge([summary("a"), summary("b")], NOW, NOW);
    expect(threads.entries.map((e) => e.id)).toEqual(["a"]);
    threads.restore("b");
    expect(threads.entries.map((e) => [e.id, e.title])).toEqual([
      ["a", "title a"],
      ["b", "kept title"],
    ]);
    threads.merge([summary("a"), summary("b")], NOW + 1, NOW + 1);
    expect(threads.entries.map((e) => e.id)).toEqual(["a", "b"]);
  });

  it("once forgotten is not brought back by restore", () => {
    const threads = new Threads([entry("a")]);
    threads.hide("a");
    threads.forget("a");
    expect(threads.restore("a")).toBeUndefined();
    expect(threads.entries).toEqual([]);
  });
});
