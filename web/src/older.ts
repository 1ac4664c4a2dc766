// The open thread's older messages, loaded a page at a time (GET /api/threads/{id}?before=)
// as the reader scrolls up, drawn above what is shown while the message they were reading
// stays where it was (paging.ts decides which page and where the scroll goes).

import type { Older } from "./api";
import { describeFailure, getThread } from "./api";
import { h } from "./dom";
import { renderHistory } from "./history";
import { t } from "./i18n";
import { keptScrollTop, OlderPages, wantsOlder } from "./paging";
import type { ConversationView } from "./view";

export class OlderHistory {
  private pages: OlderPages | null = null;
  private threadId = "";
  // Bumped by every thread shown: a page that arrives for an earlier one is dropped.
  private token = 0;
  private readonly marker = h("div", { class: "older", attrs: { role: "status" } });

  constructor(
    private readonly view: ConversationView,
    private readonly scroller: HTMLElement,
  ) {
    scroller.addEventListener("scroll", () => this.check(), { passive: true });
  }

  /** The thread `threadId` shows its newest page, `older` coming before it (null: nothing
   * does, or no thread is shown). */
  show(threadId: string | null, older: Older | null): void {
    this.token += 1;
    this.marker.remove();
    this.threadId = threadId ?? "";
    this.pages = threadId !== null && older !== null ? new OlderPages(older) : null;
    this.check();
  }

  /** Load the page before, if the reader is near the top and one is left. */
  private check(): void {
    if (this.pages && wantsOlder(this.scroller)) this.next();
  }

  private next(): void {
    const before = this.pages?.take();
    if (before) void this.load(before);
  }

  private async load(before: string): Promise<void> {
    const token = this.token;
    const pages = this.pages!;
    this.mark(t.loadingOlder);
    try {
      const page = await getThread(this.threadId, before);
      if (token !== this.token) return;
      this.keepingPlace(() => {
        this.marker.remove();
        if (page) this.view.drawAbove(() => renderHistory(this.view, page.messages));
      });
      pages.received(page?.older ?? null); // a thread deleted meanwhile has nothing more
    } catch (err) {
      if (token !== this.token) return;
      pages.failed();
      const retry = h("button", {
        class: "btn btn-small btn-ghost",
        text: t.retry,
        attrs: { type: "button" },
        on: {
          click: () => {
            pages.retry();
            this.next();
          },
        },
      });
      this.mark(t.olderFailed(describeFailure(err).text), retry);
      return;
    }
    this.check(); // still near the top after a short page: the one before it too
  }

  /** The line at the top of the conversation: loading, or why it failed. */
  private mark(text: string, action: HTMLElement | null = null): void {
    this.keepingPlace(() => {
      this.marker.replaceChildren(h("span", { class: "older-text", text }), ...(action ? [action] : []));
      this.view.list.prepend(this.marker);
    });
  }

  /** Make `change` above what is shown without moving it: the oldest message shown stays
   * where it was on screen. */
  private keepingPlace(change: () => void): void {
    const anchor = [...this.view.list.children].find((el) => el !== this.marker);
    const before = anchor?.getBoundingClientRect().top ?? 0;
    change();
    if (!anchor) return;
    const after = anchor.getBoundingClientRect().top;
    this.scroller.scrollTop = keptScrollTop(this.scroller.scrollTop, before, after);
  }
}
