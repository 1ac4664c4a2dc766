// The thread list in the sidebar (kept in localStorage) and the agent picker.

import type { GraphInfo } from "./api";
import { h } from "./dom";
import type { ThreadEntry } from "./store";

const AGENT_NAMES: Record<string, string> = {
  weather: "天气助手",
  tushare: "A 股分析",
};

export function agentName(graphId: string): string {
  return AGENT_NAMES[graphId] ?? graphId;
}

function when(ts: number): string {
  const diff = Date.now() - ts;
  if (diff < 60_000) return "刚刚";
  if (diff < 3_600_000) return `${Math.floor(diff / 60_000)} 分钟前`;
  const d = new Date(ts);
  const now = new Date();
  const hm = `${String(d.getHours()).padStart(2, "0")}:${String(d.getMinutes()).padStart(2, "0")}`;
  if (d.toDateString() === now.toDateString()) return `今天 ${hm}`;
  return `${d.getMonth() + 1}月${d.getDate()}日`;
}

export interface SidebarHandlers {
  open(entry: ThreadEntry): void;
  remove(entry: ThreadEntry): void;
}

export function renderThreads(
  list: HTMLElement,
  empty: HTMLElement,
  threads: ThreadEntry[],
  currentId: string | null,
  handlers: SidebarHandlers,
): void {
  const sorted = [...threads].sort((a, b) => b.updatedAt - a.updatedAt);
  empty.hidden = sorted.length > 0;
  list.replaceChildren(
    ...sorted.map((entry) => {
      const active = entry.id === currentId;
      return h(
        "li",
        { class: `thread${active ? " is-active" : ""}`, attrs: { "data-thread-id": entry.id } },
        h(
          "button",
          {
            class: "thread-open",
            attrs: { type: "button", "aria-current": active ? "true" : undefined },
            on: { click: () => handlers.open(entry) },
          },
          h("span", { class: "thread-name", text: entry.title || "新对话" }),
          h("span", { class: "thread-meta", text: `${agentName(entry.graphId)} · ${when(entry.updatedAt)}` }),
        ),
        h(
          "button",
          {
            class: "thread-delete",
            attrs: { type: "button", "aria-label": `删除会话：${entry.title || "新对话"}`, title: "删除会话" },
            on: { click: () => handlers.remove(entry) },
          },
          h("span", { class: "trash-icon", attrs: { "aria-hidden": "true" } }),
        ),
      );
    }),
  );
}

export function renderGraphs(select: HTMLSelectElement, graphs: GraphInfo[], selected: string): void {
  select.replaceChildren(
    ...graphs.map((graph) =>
      h("option", {
        text: agentName(graph.id),
        attrs: {
          value: graph.id,
          title: graph.description ?? "",
          selected: graph.id === selected,
        },
      }),
    ),
  );
  select.value = selected;
}
