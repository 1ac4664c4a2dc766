// What the page knows of the threads: the sidebar's entries, the open one, and how the
// server's list (GET /api/threads, read every few seconds) is merged with what the page
// saw itself. No DOM and no storage here: the page saves and draws after each change.

import type { RunStatus, ThreadSummary } from "./api";
import type { ThreadEntry, ThreadStatus } from "./store";

// A thread this page just started may not be in a list read a moment earlier.
export const NEW_THREAD_GRACE_MS = 30_000;
// A thread's state this page saw itself wins over the server's list for this long.
export const LOCAL_STATUS_MS = 1500;

/** The badge a thread's latest run earns: none once it ended well. */
export function badgeOf(status: RunStatus | null): ThreadStatus {
  switch (status) {
    case "queued":
    case "running":
      return "running";
    case "interrupted":
      return "waiting";
    case "cancelled":
      return "stopped";
    case "error":
      return "failed";
    default:
      return null;
  }
}

export class Threads {
  /** The open thread: one of `entries`, or a draft that joins them at its first message. */
  current: ThreadEntry | null = null;
  // Threads this page started, by when: kept in the list until the server lists them.
  private readonly started = new Map<string, number>();
  // When this page last learnt a thread's state itself: server lists read before that
  // are older news for that thread.
  private readonly seenAt = new Map<string, number>();
  // Threads deleted here whose DELETE waits for the undo to run out: the server still
  // lists them meanwhile, and they must not come back with its next list.
  private readonly deleting = new Map<string, ThreadEntry>();

  constructor(public entries: ThreadEntry[]) {}

  known(id: string): ThreadEntry | undefined {
    return this.entries.find((entry) => entry.id === id);
  }

  /** What this page knows of a thread's state right now; true when its badge changed. */
  setStatus(threadId: string, status: ThreadStatus, now: number): boolean {
    this.seenAt.set(threadId, now);
    const entry = this.known(threadId) ?? (this.current?.id === threadId ? this.current : undefined);
    if (!entry || entry.status === status) return false;
    entry.status = status;
    return true;
  }

  /** Take the server's list, read from `asked` on: it names the threads (a thread it does
   * not list was deleted elsewhere, unless this page started it a moment ago), their
   * titles and their states (unless this page saw a newer one itself). Known entries are
   * updated in place: the open thread's entry is one of them. */
  merge(summaries: ThreadSummary[], asked: number, now: number): void {
    const listed = new Map(summaries.map((summary) => [summary.threadId, summary]));
    const threads: ThreadEntry[] = [];
    for (const summary of listed.values()) {
      if (this.deleting.has(summary.threadId)) continue;
      const entry = this.known(summary.threadId) ?? {
        id: summary.threadId,
        graphId: summary.graphId,
        title: "",
        updatedAt: 0,
      };
      entry.graphId = summary.graphId;
      entry.title = summary.title || entry.title;
      entry.origin = summary.origin;
      entry.updatedAt = Math.max(summary.updatedAt, entry.updatedAt);
      if ((this.seenAt.get(entry.id) ?? 0) < asked - LOCAL_STATUS_MS) {
        entry.status = badgeOf(summary.status);
      }
      this.started.delete(entry.id);
      threads.push(entry);
    }
    for (const entry of this.entries) {
      const since = this.started.get(entry.id);
      if (!listed.has(entry.id) && since !== undefined && now - since < NEW_THREAD_GRACE_MS) {
        threads.push(entry);
      }
    }
    this.entries = threads;
  }

  /** The open thread had activity now: it moves up, and a draft joins the list. */
  touch(now: number): ThreadEntry | null {
    const entry = this.current;
    if (!entry) return null;
    entry.updatedAt = now;
    if (!this.known(entry.id)) {
      this.entries.push(entry);
      this.started.set(entry.id, now);
    }
    return entry;
  }

  /** Out of the list until `restore` (an undo) or `forget` (the DELETE went through). */
  hide(id: string): void {
    const entry = this.known(id);
    if (!entry) return;
    this.deleting.set(id, entry);
    this.entries = this.entries.filter((other) => other.id !== id);
  }

  /** A hidden thread back in the list, as it was. */
  restore(id: string): ThreadEntry | undefined {
    const entry = this.deleting.get(id);
    this.deleting.delete(id);
    if (entry && !this.known(id)) this.entries.push(entry);
    return entry;
  }

  /** The thread is gone from the server. */
  forget(id: string): void {
    this.entries = this.entries.filter((entry) => entry.id !== id);
    this.started.delete(id);
    this.deleting.delete(id);
  }
}
