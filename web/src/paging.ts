// Paging back through a long thread: the page shows its latest messages and loads the
// ones before them as the reader scrolls up, keeping the message they were reading where
// it was. Pure parts: which page comes next, and where the scroll position goes.

import type { Older } from "./api";

// How close to the top (px) the reader scrolls before the page before is asked for.
export const NEAR_TOP_PX = 400;

/** The pages before those shown: where the next one continues, and whether it is on its way. */
export class OlderPages {
  private loading = false;
  // A page that failed is not asked for again until the reader says so.
  private stalled = false;

  constructor(private next: Older | null) {}

  /** The `before` of the page to load now, or null: none left, one on its way, or stalled
   * by a failure. The page is then on its way until `received` or `failed`. */
  take(): string | null {
    if (this.loading || this.stalled || this.next === null) return null;
    this.loading = true;
    return this.next.before;
  }

  /** The page came; `older`: what comes before it. */
  received(older: Older | null): void {
    this.loading = false;
    this.next = older;
  }

  failed(): void {
    this.loading = false;
    this.stalled = true;
  }

  /** Try the page that failed again. */
  retry(): void {
    this.stalled = false;
  }

  /** Messages before those shown (0: the thread's start is shown). */
  get left(): number {
    return this.next?.count ?? 0;
  }
}

/** Whether the reader is near enough to the top to want what comes before. */
export function wantsOlder(scroller: { scrollTop: number }): boolean {
  return scroller.scrollTop < NEAR_TOP_PX;
}

/** The scroll position that keeps a message in place once content went in above it: its
 * distance from the top of the view was `before` and is now `after` (both in px). */
export function keptScrollTop(scrollTop: number, before: number, after: number): number {
  return scrollTop + (after - before);
}
