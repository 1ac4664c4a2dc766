// How the page words things it did not write: message content as text, a question's
// title, a new thread's title, tool arguments, times. Pure functions (no DOM), so the unit
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

/** A tool call's arguments indented for reading (as they came when they are not JSON). */
export function prettyArgs(raw: string): string {
  if (!raw.trim()) return t.noArgs;
  try {
    return JSON.stringify(JSON.parse(raw), null, 2);
  } catch {
    return raw;
  }
}

/** A tool call's argument values on one short line; nothing until they are whole JSON. */
export function briefArgs(raw: string): string {
  try {
    const parsed: unknown = JSON.parse(raw);
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) {
      const parts = Object.values(parsed as Record<string, unknown>).map((v) =>
        typeof v === "string" ? v : JSON.stringify(v),
      );
      return oneLine(parts.join("，"), 48);
    }
  } catch {
    // still streaming: show nothing rather than half a JSON document
  }
  return "";
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
