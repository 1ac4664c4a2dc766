import { describe, expect, it } from "vitest";
import {
  briefArgs,
  briefResult,
  draftTitle,
  indented,
  oneLine,
  prettyArgs,
  questionOf,
  shownValue,
  textOf,
  when,
} from "../src/format";
import { t } from "../src/i18n";

describe("textOf", () => {
  it("keeps a string content as it is", () => {
    expect(textOf("北京晴")).toBe("北京晴");
  });

  it("joins the text parts of a list and skips the parts without text", () => {
    const parts = [{ type: "text", text: "上海" }, { type: "image", url: "x.png" }, { type: "text", text: "多云" }];
    expect(textOf(parts)).toBe("上海多云");
  });

  it("reads anything else as no text", () => {
    expect(textOf(null)).toBe("");
    expect(textOf({ text: "not a list" })).toBe("");
  });
});

describe("questionOf", () => {
  it("names the question an ask tool put", () => {
    expect(questionOf('{"message": "哪个城市？", "placeholder": "北京"}')).toBe("哪个城市？");
  });

  it("falls back to a neutral title for arguments without a message or not JSON", () => {
    expect(questionOf('{"options": ["a"]}')).toBe(t.askedYou);
    expect(questionOf('{"message": "half')).toBe(t.askedYou);
  });
});

describe("draftTitle", () => {
  it("collapses whitespace like the server's title", () => {
    expect(draftTitle("北京\n  明天\t天气")).toBe("北京 明天 天气");
  });

  it("cuts a long first message to 40 characters plus an ellipsis", () => {
    const title = draftTitle("天".repeat(41));
    expect(title).toBe(`${"天".repeat(40)}…`);
    expect(draftTitle("天".repeat(40))).toBe("天".repeat(40));
  });
});

describe("tool arguments", () => {
  it("are indented when they are JSON and shown as they came otherwise", () => {
    expect(prettyArgs('{"location":"北京"}')).toBe('{\n  "location": "北京"\n}');
    expect(prettyArgs('{"location":"北')).toBe('{"location":"北');
    expect(prettyArgs("  ")).toBe(t.noArgs);
  });

  it("are summed up on one line by their values, and not at all while half streamed", () => {
    expect(briefArgs('{"location": "北京", "days": 3, "hourly": ["temp"]}')).toBe('北京，3，["temp"]');
    expect(briefArgs('{"location": "北')).toBe("");
    expect(briefArgs('["a", "b"]')).toBe("");
  });

  it("show the dates tushare sends as YYYYMMDD as dates", () => {
    const daily = '{"ts_code": "000001.SZ", "start_date": "20250701", "end_date": "20250730"}';
    expect(briefArgs(daily)).toBe("000001.SZ，2025-07-01，2025-07-30");
    expect(shownValue("trade_date", 20250102)).toBe("2025-01-02");
    expect(shownValue("date", "20240229")).toBe("2024-02-29");
  });

  it("leave alone what is not a date: other keys, other lengths, days no calendar has", () => {
    expect(shownValue("ts_code", "20250701")).toBe("20250701");
    expect(shownValue("update", "20250701")).toBe("20250701");
    expect(shownValue("end_date", "2025070")).toBe("2025070");
    expect(shownValue("end_date", "20251301")).toBe("20251301");
    expect(shownValue("end_date", "20250230")).toBe("20250230");
    expect(shownValue("end_date", "2025-07-30")).toBe("2025-07-30");
  });

  it("cut to one line keeps at most the given length, the ellipsis included", () => {
    expect(oneLine("a\nb   c", 10)).toBe("a b c");
    expect(oneLine("abcdefghijk", 5)).toBe("abcd…");
  });
});

describe("tool results", () => {
  it("read like the arguments when they are a JSON object", () => {
    expect(briefResult('{"ts_code": "000001.SZ", "name": "平安银行"}')).toBe("000001.SZ，平安银行");
    expect(briefResult('{"trade_date": "20250701", "close": 7.1}')).toBe("2025-07-01，7.1");
  });

  it("are flattened to one line when they are text, a list or half a document", () => {
    expect(briefResult("北京：晴\n  12°C")).toBe("北京：晴 12°C");
    expect(briefResult('["a", "b"]')).toBe('["a", "b"]');
    expect(briefResult('{"ts_code": "0000')).toBe('{"ts_code": "0000');
    expect(briefResult("天".repeat(130))).toBe(`${"天".repeat(119)}…`);
  });

  it("are indented in full when they are JSON and kept as they came otherwise", () => {
    expect(indented('{"ts_code":"000001.SZ"}')).toBe('{\n  "ts_code": "000001.SZ"\n}');
    expect(indented("北京：晴\n12°C")).toBe("北京：晴\n12°C");
    expect(indented("7")).toBe("7");
  });
});

describe("when", () => {
  const now = new Date(2026, 11, 1, 15, 30).getTime();

  it("says just now for the last minute and minutes ago for the last hour", () => {
    expect(when(now - 59_000, now)).toBe(t.justNow);
    expect(when(now - 5 * 60_000 - 1, now)).toBe(t.minutesAgo(5));
    expect(when(now - 59 * 60_000, now)).toBe(t.minutesAgo(59));
  });

  it("gives the time of day for earlier today and the date before that", () => {
    const morning = new Date(2026, 11, 1, 9, 5).getTime();
    expect(when(morning, now)).toBe(t.today("09:05"));
    const yesterday = new Date(2026, 10, 30, 23, 0).getTime();
    expect(when(yesterday, now)).not.toContain("23");
    expect(when(yesterday, now)).toMatch(/30/);
  });
});
