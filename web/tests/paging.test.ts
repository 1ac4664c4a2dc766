import { describe, expect, it } from "vitest";
import { keptScrollTop, NEAR_TOP_PX, OlderPages, wantsOlder } from "../src/paging";

describe("older pages", () => {
  it("are asked for one at a time, each from where the last one said the older ones continue", () => {
    const pages = new OlderPages({ before: "m100", count: 200 });
    expect(pages.left).toBe(200);
    expect(pages.take()).toBe("m100");
    expect(pages.take()).toBeNull(); // on its way: not asked for twice
    pages.received({ before: "m0", count: 100 });
    expect(pages.left).toBe(100);
    expect(pages.take()).toBe("m0");
    pages.received(null);
    expect(pages.left).toBe(0);
    expect(pages.take()).toBeNull(); // the thread's start is shown
  });

  it("of a thread that fits one page are never asked for", () => {
    expect(new OlderPages(null).take()).toBeNull();
  });

  it("are not asked for again after a failure until the reader retries, then from the same place", () => {
    const pages = new OlderPages({ before: "m100", count: 5 });
    expect(pages.take()).toBe("m100");
    pages.failed();
    expect(pages.take()).toBeNull();
    pages.retry();
    expect(pages.take()).toBe("m100");
  });
});

describe("the scroll position", () => {
  it("asks for older messages near the top only", () => {
    expect(wantsOlder({ scrollTop: 0 })).toBe(true);
    expect(wantsOlder({ scrollTop: NEAR_TOP_PX - 1 })).toBe(true);
    expect(wantsOlder({ scrollTop: NEAR_TOP_PX })).toBe(false);
  });

  it("moves by as much as the message being read was pushed down, and not when it was not", () => {
    // 1800 px went in above a message 40 px from the top, the view scrolled to 120.
    expect(keptScrollTop(120, 40, 1840)).toBe(1920);
    // The browser kept it in place itself (scroll anchoring): nothing to add.
    expect(keptScrollTop(1920, 40, 40)).toBe(1920);
  });
});
