// How the page words things it did not write: message content as text, a question's
// title, a new thread's title, tool arguments and results, times. Pure functions (no DOM), so the unit
// tests (web/tests/) run them as they are.

import { locale, t } from "./i18n";

/** The text of a message's content: a string, or the text parts of a list of parts. */
export function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((part) => (part && typeof part === "object" && "text" in part ? String(part.text) : ""))
      .join("");
  }
  return "";
}

/** The question an ask_* call put (its `message` argument), or a neutral title. */
export function questionOf(args: string): string {
  try {
    const parsed = JSON.parse(args) as { message?: unknown };
    if (typeof parsed.message === "string") return parsed.message;
  } catch {
    // fall through to a neutral title
  }
  return t.askedYou;
}

/** The title the server gives a thread from its first message: whitespace collapsed, 40
 * characters at most plus an ellipsis (docs/api.md, "Threads"). */
export function draftTitle(text: string): string {
  const flat = text.replace(/\s+/g, " ");
  return flat.length > 40 ? `${flat.slice(0, 40)}…` : flat;
}

/** `text` on one line, cut to `max` characters with an ellipsis. */
export function oneLine(text: string, max: number): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/** JSON text indented for reading; anything else (half streamed, plain text) as it came. */
export function indented(raw: string): string {
  try {
    const parsed: unknown = JSON.parse(raw);
    if (parsed && typeof parsed === "object") return JSON.stringify(parsed, null, 2);
  } catch {
    // not JSON: as it came
  }
  return raw;
}

/** A tool call's arguments indented for reading (as they came when they are not JSON). */
export function prettyArgs(raw: string): string {
  return raw.trim() ? indented(raw) : t.noArgs;
}

// Tushare's dates travel as YYYYMMDD under keys named `date` or `…_date`.
const DATE_KEY = /(^|_)date$/;
const COMPACT_DATE = /^(\d{4})(\d{2})(\d{2})$/;

/** One value of a JSON object as a reader takes it: a string as it is, a date-named key's
 * YYYYMMDD as YYYY-MM-DD (when it is a calendar date), anything else as JSON. */
export function shownValue(key: string, value: unknown): string {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  const date = DATE_KEY.test(key) ? COMPACT_DATE.exec(text) : null;
  if (date) {
    const [, y, m, d] = date.map(Number);
    const day = new Date(Date.UTC(y, m - 1, d));
    if (day.getUTCFullYear() === y && day.getUTCMonth() === m - 1 && day.getUTCDate() === d) {
      return `${date[1]}-${date[2]}-${date[3]}`;
    }
  }
  return text;
}

/** The values of a JSON object's text on one line, cut to `max`; null when it is none. */
function valuesLine(raw: string, max: number): string | null {
  try {
    const parsed: unknown = JSON.parse(raw);
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) {
      const parts = Object.entries(parsed as Record<string, unknown>).map(([key, value]) =>
        shownValue(key, value),
      );
      return oneLine(parts.join("，"), max);
    }
  } catch {
    // not (yet) a whole JSON document
  }
  return null;
}

/** A tool call's argument values on one short line; nothing until they are whole JSON. */
export function briefArgs(raw: string): string {
  return valuesLine(raw, 48) ?? "";
}

/** A tool result on one line: a JSON object's values the way its arguments are shown,
 * any other text flattened. */
export function briefResult(content: string): string {
  return valuesLine(content, 120) ?? oneLine(content, 120);
}

const dayMonth = new Intl.DateTimeFormat(locale, { month: "short", day: "numeric" });
const hourMinute = new Intl.DateTimeFormat(locale, { hour: "2-digit", minute: "2-digit", hour12: false });

/** When `ts` (ms since the epoch) was, seen from `now`: just now, minutes ago, today at
 * a time, or a date. */
export function when(ts: number, now: number = Date.now()): string {
  const diff = now - ts;
  if (diff < 60_000) return t.justNow;
  if (diff < 3_600_000) return t.minutesAgo(Math.floor(diff / 60_000));
  const d = new Date(ts);
  if (d.toDateString() === new Date(now).toDateString()) return t.today(hourMinute.format(d));
  return dayMonth.format(d);
}
