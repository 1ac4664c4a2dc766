// The thread list in the sidebar and the agent picker.
//
// ThreadList.render(threads, currentId) draws the list newest first, each row with its
// state badge (running / waiting for you / stopped / failed), a mark on the threads a
// terminal started, a rename and a delete button. The list is redrawn whenever the server's list is read again (every few
// seconds), so rows that did not change are kept as they are: focus stays where it was
// and a row being renamed is left alone until its edit ends. filter(query) narrows the
// rows to the titles holding the query (the page has the whole list, so no server search).

import type { GraphInfo } from "./api";
import { h } from "./dom";
import { when } from "./format";
import { agentName, t } from "./i18n";
import type { ThreadEntry, ThreadStatus } from "./store";

const BADGE_TEXT: Record<Exclude<ThreadStatus, null>, string> = {
  running: t.statusRunning,
  waiting: t.statusWaiting,
  stopped: t.statusStopped,
  failed: t.statusFailed,
};

export interface SidebarHandlers {
  open(entry: ThreadEntry): void;
  remove(entry: ThreadEntry): void;
  /** Save a new title; resolves true once the server has it. */
  rename(entry: ThreadEntry, title: string): Promise<boolean>;
}

export class ThreadList {
  private readonly rows = new Map<string, { key: string; el: HTMLLIElement }>();
  private editing: string | null = null;
  private last: { threads: ThreadEntry[]; currentId: string | null } = { threads: [], currentId: null };
  private query = "";

  constructor(
    private readonly list: HTMLElement,
    private readonly empty: HTMLElement,
    private readonly handlers: SidebarHandlers,
  ) {}

  /** Show only the threads whose title holds `query` (any case); "" shows them all. */
  filter(query: string): void {
    this.query = query.trim().toLocaleLowerCase();
    this.render(this.last.threads, this.last.currentId);
  }

  render(threads: ThreadEntry[], currentId: string | null): void {
    this.last = { threads, currentId };
    const sorted = [...threads]
      .filter((entry) => !this.query || (entry.title || t.newThread).toLocaleLowerCase().includes(this.query))
      .sort((a, b) => b.updatedAt - a.updatedAt);
    this.empty.hidden = sorted.length > 0;
    this.empty.textContent = threads.length ? t.noMatches : t.noThreads;
    const focused = document.activeElement;
    const focusRow = focused instanceof HTMLElement ? focused.closest<HTMLElement>("li.thread") : null;
    const focusId = focusRow && this.list.contains(focusRow) ? focusRow.dataset.threadId : undefined;
    const focusClass = focused instanceof HTMLElement ? focused.classList[0] : undefined;

    const rows = sorted.map((entry) => {
      const active = entry.id === currentId;
      const status = entry.status ?? null;
      const key = JSON.stringify([entry.title, entry.graphId, status, entry.origin, active, when(entry.updatedAt)]);
      const old = this.rows.get(entry.id);
      if (old && (old.key === key || this.editing === entry.id)) return [entry.id, old] as const;
      return [entry.id, { key, el: this.row(entry, active) }] as const;
    });
    this.rows.clear();
    for (const [id, row] of rows) this.rows.set(id, row);

    const wanted = rows.map(([, row]) => row.el);
    const same =
      wanted.length === this.list.children.length && wanted.every((el, i) => this.list.children[i] === el);
    if (!same) this.list.replaceChildren(...wanted);
    // A redrawn row takes the focus its old self had (a keyboard user stays in place).
    if (focusId && document.activeElement !== focused) {
      const row = this.rows.get(focusId)?.el;
      const target = row?.querySelector<HTMLElement>(focusClass ? `.${focusClass}` : "button");
      target?.focus({ preventScroll: true });
    }
  }

  private row(entry: ThreadEntry, active: boolean): HTMLLIElement {
    const title = entry.title || t.newThread;
    const status = entry.status ?? null;
    return h(
      "li",
      {
        class: `thread${active ? " is-active" : ""}`,
        attrs: { "data-thread-id": entry.id, "data-status": status ?? undefined },
      },
      h(
        "button",
        {
          class: "thread-open",
          attrs: { type: "button", "aria-current": active ? "true" : undefined },
          on: { click: () => this.handlers.open(entry) },
        },
        h(
          "span",
          { class: "thread-line" },
          h("span", { class: "thread-name", text: title }),
          status
            ? h("span", { class: "thread-status", text: BADGE_TEXT[status], attrs: { "data-status": status } })
            : null,
        ),
        h(
          "span",
          { class: "thread-meta" },
          entry.origin === "terminal"
            ? h("span", {
                class: "thread-origin",
                text: `${t.fromTerminal} · `,
                attrs: { title: t.fromTerminalHint, "data-origin": "terminal" },
              })
            : null,
          `${agentName(entry.graphId)} · ${when(entry.updatedAt)}`,
        ),
      ),
      h(
        "button",
        {
          class: "thread-rename thread-action",
          attrs: { type: "button", "aria-label": t.renameThreadNamed(title), title: t.renameThread },
          on: { click: (event) => this.edit(entry, (event.currentTarget as HTMLElement).closest("li")!) },
        },
        h("span", { class: "pencil-icon", attrs: { "aria-hidden": "true" } }),
      ),
      h(
        "button",
        {
          class: "thread-delete thread-action",
          attrs: { type: "button", "aria-label": t.deleteThreadNamed(title), title: t.deleteThread },
          on: { click: () => this.handlers.remove(entry) },
        },
        h("span", { class: "trash-icon", attrs: { "aria-hidden": "true" } }),
      ),
    );
  }

  /** Rename in place: Enter (or leaving the box) saves, Escape keeps the old title. */
  private edit(entry: ThreadEntry, row: HTMLElement): void {
    const opener = row.querySelector<HTMLElement>(".thread-open");
    if (!opener || this.editing) return;
    this.editing = entry.id;
    row.classList.add("is-editing");
    const input = h("input", {
      class: "thread-title-input",
      attrs: {
        type: "text",
        "aria-label": t.threadName,
        maxlength: "200",
        autocomplete: "off",
        spellcheck: "false",
      },
    });
    input.value = entry.title;
    const form = h("form", { class: "thread-rename-form" }, input);
    opener.replaceWith(form);
    input.focus();
    input.select();

    let finished = false;
    const end = (restoreFocus: boolean) => {
      finished = true;
      this.editing = null;
      row.classList.remove("is-editing");
      form.replaceWith(opener);
      if (restoreFocus) row.querySelector<HTMLElement>(".thread-rename")?.focus({ preventScroll: true });
      // The row was kept as it was during the edit: draw it with its new title now.
      this.render(this.last.threads, this.last.currentId);
    };
    const commit = async (restoreFocus: boolean) => {
      if (finished) return;
      const title = input.value.trim();
      if (!title || title === entry.title) {
        end(restoreFocus);
        return;
      }
      input.disabled = true;
      finished = true;
      const ok = await this.handlers.rename(entry, title);
      finished = false;
      if (ok) {
        end(restoreFocus);
        return;
      }
      input.disabled = false;
      input.setAttribute("aria-invalid", "true");
      input.focus();
    };
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      void commit(true);
    });
    input.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.preventDefault();
        event.stopPropagation(); // the sidebar stays open on a phone
        if (!finished) end(true);
      }
    });
    input.addEventListener("blur", () => void commit(false));
  }
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
