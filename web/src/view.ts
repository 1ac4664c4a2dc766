// The conversation on screen: user bubbles, streamed assistant Markdown, tool cards and
// inline notices. Tool names, arguments and results are always set as text. A result
// that carries data (tooldata.ts) is drawn under its card's head as well: a forecast at
// once, a candlestick chart once its lazily loaded module (candles.ts) has arrived.

import type { GraphInfo } from "./api";
import { h } from "./dom";
import { renderForecast } from "./forecast";
import { briefArgs, briefResult, indented, oneLine, prettyArgs } from "./format";
import { agentName, examples as examplesOf, t, toolLabel } from "./i18n";
import { setMarkdown } from "./markdown";
import type { ToolData } from "./tooldata";

/** How a tool call ended, as the server says in its result (`metadata.outcome`). */
export type Outcome = string;

// Calls the user (or a stopped run) kept from running, as opposed to calls that failed.
const NOT_RUN = new Set(["declined", "cancelled", "abandoned"]);

/** The outcome a TOOL_CALL_RESULT event or a tool message carries ("ok" when it says none). */
export function outcomeOf(metadata: unknown, error?: string | null): Outcome {
  const outcome = (metadata as { outcome?: unknown } | undefined)?.outcome;
  if (typeof outcome === "string") return outcome;
  return error ? "error" : "ok";
}

// The ask_* tools exist to pause for the user: their interrupt control stands for them on
// screen, so they get no tool card of their own.
const ASK_TOOLS = new Set(["ask_input", "ask_choice", "ask_multi_choice", "ask_confirm"]);
const ANSWER_PREFIX = /^用户(回答|选择|确认)：/;

export function isAskTool(name: string): boolean {
  return ASK_TOOLS.has(name);
}

export type ToolState =
  | "streaming"
  | "running"
  | "waiting"
  | "done"
  | "failed"
  | "declined"
  | "stopped";

const STATE_TEXT: Record<ToolState, string> = {
  streaming: t.toolStreaming,
  running: t.toolRunning,
  waiting: t.toolWaiting,
  done: t.toolDone,
  failed: t.toolFailed,
  declined: t.toolDeclined,
  stopped: t.toolStopped,
};

/** What a drawn result needs when its card goes away (a chart's observers). */
interface Figure {
  dispose(): void;
}

export class ToolCard {
  /** The card: its folding part (head, arguments, result text) and, below, the figure. */
  readonly el: HTMLElement;
  private readonly fold: HTMLDetailsElement;
  private readonly brief: HTMLElement;
  private readonly stateEl: HTMLElement;
  private readonly argsEl: HTMLElement;
  private readonly resultEl: HTMLElement;
  private readonly resultBox: HTMLElement;
  private readonly preview: HTMLElement;
  private readonly figureBox: HTMLElement;
  private figure: Figure | null = null;
  // Bumped whenever the figure changes: a chart module arriving late draws nothing stale.
  private drawing = 0;
  private args = "";
  state: ToolState = "streaming";

  constructor(
    readonly id: string,
    readonly name: string,
  ) {
    this.brief = h("span", { class: "tool-brief" });
    this.stateEl = h("span", { class: "tool-state" });
    this.argsEl = h("pre", { class: "tool-pre" });
    this.resultEl = h("pre", { class: "tool-pre" });
    this.preview = h("span", { class: "tool-preview" });
    this.resultBox = h(
      "div",
      { class: "tool-section", attrs: { hidden: true } },
      h("div", { class: "tool-section-title", text: t.result }),
      this.resultEl,
    );
    this.figureBox = h("div", { class: "tool-figure", attrs: { hidden: true } });
    const label = toolLabel(name);
    this.fold = h(
      "details",
      { class: "tool-fold" },
      h(
        "summary",
        { class: "tool-head" },
        h("span", { class: "tool-icon", attrs: { "aria-hidden": "true" } }),
        h(
          "span",
          { class: "tool-title" },
          label ? h("span", { class: "tool-label", text: label }) : null,
          h("code", { class: "tool-name", text: name }),
          this.brief,
        ),
        this.stateEl,
        h("span", { class: "tool-chevron", attrs: { "aria-hidden": "true" } }),
        this.preview,
      ),
      h(
        "div",
        { class: "tool-body" },
        h(
          "div",
          { class: "tool-section" },
          h("div", { class: "tool-section-title", text: t.args }),
          this.argsEl,
        ),
        this.resultBox,
      ),
    );
    this.el = h(
      "div",
      { class: "tool", attrs: { "data-tool-call-id": id, "data-tool-name": name } },
      this.fold,
      this.figureBox,
    );
    this.setState("streaming");
  }

  appendArgs(delta: string): void {
    this.setArgs(this.args + delta);
  }

  setArgs(args: string): void {
    this.args = args;
    this.argsEl.textContent = prettyArgs(args);
    this.brief.textContent = briefArgs(args);
  }

  setResult(content: string, outcome: Outcome, data: ToolData | null = null): void {
    this.resultEl.textContent = content ? indented(content) : t.empty;
    this.resultBox.hidden = false;
    this.preview.textContent = briefResult(content);
    this.setState(outcome === "ok" ? "done" : NOT_RUN.has(outcome) ? "declined" : "failed");
    this.draw(data);
  }

  /** Draw `data` under the head (replacing what was drawn), or nothing for null. */
  private draw(data: ToolData | null): void {
    this.dispose();
    const token = this.drawing;
    this.el.classList.toggle("has-figure", data !== null);
    this.figureBox.hidden = data === null;
    if (data === null) return;
    if (data.kind === "forecast") {
      this.figureBox.replaceChildren(renderForecast(data));
      return;
    }
    const host = h("figure", { class: "chart chart-candles", attrs: { "aria-busy": "true" } });
    this.figureBox.replaceChildren(host);
    // The chart library is loaded on the first chart, not with the page.
    import("./candles")
      .then(({ drawCandles }) => {
        if (token !== this.drawing) return;
        this.figure = drawCandles(host, data);
        host.setAttribute("aria-busy", "false");
      })
      .catch(() => {
        // Without its module (an old tab after an upgrade, a network blip) the text stays.
        if (token !== this.drawing) return;
        this.figureBox.hidden = true;
        this.el.classList.remove("has-figure");
      });
  }

  /** Let go of what the figure holds (observers, listeners); the card may be dropped. */
  dispose(): void {
    this.drawing += 1;
    this.figure?.dispose();
    this.figure = null;
    this.figureBox.replaceChildren();
  }

  setState(state: ToolState): void {
    this.state = state;
    this.el.dataset.state = state;
    this.stateEl.textContent = STATE_TEXT[state];
    this.fold.setAttribute("aria-busy", state === "running" || state === "streaming" ? "true" : "false");
  }

  get argsText(): string {
    return this.args;
  }

  get finished(): boolean {
    return this.state === "done" || this.state === "failed" || this.state === "declined";
  }
}

export class AssistantText {
  readonly el: HTMLElement;
  private readonly body: HTMLElement;
  private text = "";
  private scheduled = 0;

  constructor(readonly id: string) {
    this.body = h("div", { class: "md" });
    this.el = h("article", { class: "msg msg-assistant", attrs: { "data-message-id": id } }, this.body);
  }

  append(delta: string): void {
    this.text += delta;
    this.el.classList.add("streaming");
    // Re-render at most once a frame: long answers stream hundreds of deltas.
    if (!this.scheduled) {
      this.scheduled = requestAnimationFrame(() => {
        this.scheduled = 0;
        setMarkdown(this.body, this.text);
      });
    }
  }

  set(text: string): void {
    this.text = text;
    setMarkdown(this.body, text);
  }

  finish(): void {
    if (this.scheduled) cancelAnimationFrame(this.scheduled);
    this.scheduled = 0;
    setMarkdown(this.body, this.text);
    this.el.classList.remove("streaming");
  }
}

/** A reply's reasoning (思考过程): open while it streams, folded once done (unless the
 * reader opened or folded it themselves), plain text. */
export class ReasoningBlock {
  readonly el: HTMLDetailsElement;
  private readonly body: HTMLElement;
  private readonly stateEl: HTMLElement;
  private readonly preview: HTMLElement;
  private text = "";
  private scheduled = 0;
  // The reader's own choice (a click or Enter on the summary) wins over the automatic
  // open-while-streaming, fold-when-done.
  private chosen = false;

  constructor(readonly id: string) {
    this.body = h("div", { class: "reasoning-body" });
    this.stateEl = h("span", { class: "reasoning-state" });
    this.preview = h("span", { class: "reasoning-preview" });
    this.el = h(
      "details",
      { class: "reasoning", attrs: { "data-message-id": id } },
      h(
        "summary",
        { class: "reasoning-head" },
        h("span", { class: "reasoning-icon", attrs: { "aria-hidden": "true" } }),
        h("span", { class: "reasoning-title", text: t.reasoning }),
        this.stateEl,
        h("span", { class: "reasoning-chevron", attrs: { "aria-hidden": "true" } }),
        this.preview,
      ),
      this.body,
    );
    this.el.querySelector("summary")?.addEventListener("click", () => {
      this.chosen = true;
    });
    this.el.addEventListener("toggle", () => this.renderPreview());
    this.setStreaming(false);
  }

  /** Start over (a replayed run rebuilds what the history showed) and stream. */
  restart(): void {
    this.text = "";
    this.render();
    this.setStreaming(true);
  }

  append(delta: string): void {
    this.text += delta;
    if (!this.streaming) this.setStreaming(true);
    // At most once a frame, like the answer: a long thought streams many deltas.
    if (!this.scheduled) {
      this.scheduled = requestAnimationFrame(() => {
        this.scheduled = 0;
        this.render();
      });
    }
  }

  set(text: string): void {
    this.text = text;
    this.finish();
  }

  finish(): void {
    if (this.scheduled) cancelAnimationFrame(this.scheduled);
    this.scheduled = 0;
    this.render();
    this.setStreaming(false);
  }

  get streaming(): boolean {
    return this.el.dataset.state === "streaming";
  }

  private setStreaming(streaming: boolean): void {
    if (!this.chosen) this.el.open = streaming;
    this.el.dataset.state = streaming ? "streaming" : "done";
    this.el.classList.toggle("streaming", streaming);
    this.el.setAttribute("aria-busy", streaming ? "true" : "false");
    this.stateEl.textContent = streaming ? t.reasoningLive : "";
    this.stateEl.hidden = !streaming;
    this.renderPreview();
  }

  private render(): void {
    this.body.textContent = this.text;
    this.renderPreview();
  }

  private renderPreview(): void {
    // Folded by the reader while it streams: its newest words show it is under way.
    const lines = this.text.trim().split("\n");
    const folded = this.streaming && !this.el.open;
    this.preview.textContent = folded ? oneLine(lines[lines.length - 1] ?? "", 120) : "";
  }
}

export interface NoticeAction {
  label: string;
  run: () => void;
}

export class ConversationView {
  private readonly texts = new Map<string, AssistantText>();
  private readonly tools = new Map<string, ToolCard>();
  private readonly thoughts = new Map<string, ReasoningBlock>();

  // Follow new content while the reader is at the bottom; leave them be once they scroll up.
  private stuck = true;
  // Where `add` puts elements while `drawAbove` draws (null: at the end of the list).
  private above: DocumentFragment | null = null;

  constructor(
    readonly list: HTMLElement,
    private readonly scroller: HTMLElement,
  ) {
    scroller.addEventListener("scroll", () => {
      this.stuck = this.nearBottom();
    });
    // New content grows the list; the foot of the page growing (the wait-or-stop question,
    // the progress line, a taller message box) shrinks the scroller: either way, keep
    // the newest line in view.
    const follow = new ResizeObserver(() => {
      if (this.stuck) this.scrollToBottom();
    });
    follow.observe(list);
    follow.observe(scroller);
  }

  clear(): void {
    this.texts.clear();
    for (const card of this.tools.values()) card.dispose();
    this.tools.clear();
    this.thoughts.clear();
    this.list.replaceChildren();
  }

  get isEmpty(): boolean {
    return this.list.querySelector(".msg, .tool, .reasoning, .interrupt, .notice") === null;
  }

  showWelcome(graph: GraphInfo | undefined, onPick: (text: string) => void): void {
    const examples = examplesOf(graph?.id ?? "");
    this.list.replaceChildren(
      h(
        "div",
        { class: "welcome" },
        h("div", { class: "welcome-mark", attrs: { "aria-hidden": "true" } }),
        h("h2", { class: "welcome-title", text: graph ? t.talkTo(agentName(graph.id)) : t.startChat }),
        graph?.description ? h("p", { class: "welcome-desc", text: graph.description }) : null,
        examples.length
          ? h(
              "div",
              { class: "examples", attrs: { role: "group", "aria-label": t.examples } },
              ...examples.map((example) =>
                h("button", {
                  class: "example",
                  text: example,
                  attrs: { type: "button" },
                  on: { click: () => onPick(example) },
                }),
              ),
            )
          : null,
      ),
    );
  }

  private add(el: HTMLElement): void {
    this.list.querySelector(".welcome")?.remove();
    (this.above ?? this.list).appendChild(el);
  }

  /** Draw older content above what is shown: what `draw` adds goes in before it, in order. */
  drawAbove(draw: () => void): void {
    const above = document.createDocumentFragment();
    this.above = above;
    try {
      draw();
    } finally {
      this.above = null;
    }
    this.list.prepend(above);
  }

  addUser(text: string, id = ""): HTMLElement {
    const el = h(
      "article",
      { class: "msg msg-user", attrs: { "data-message-id": id } },
      h("div", { class: "bubble", text }),
    );
    this.add(el);
    return el;
  }

  assistant(id: string): AssistantText {
    let block = this.texts.get(id);
    if (!block) {
      block = new AssistantText(id);
      this.texts.set(id, block);
      this.add(block.el);
    }
    return block;
  }

  /** The reasoning block `id` (`<reply id>:reasoning`), added where the list ends. */
  reasoning(id: string): ReasoningBlock {
    let block = this.thoughts.get(id);
    if (!block) {
      block = new ReasoningBlock(id);
      this.thoughts.set(id, block);
      this.add(block.el);
    }
    return block;
  }

  /** Reasoning a stopped or failed run left streaming: what came stays, done. */
  settleReasoning(): void {
    for (const block of this.thoughts.values()) if (block.streaming) block.finish();
  }

  tool(id: string, name = "tool"): ToolCard {
    let card = this.tools.get(id);
    if (!card) {
      card = new ToolCard(id, name);
      this.tools.set(id, card);
      if (!isAskTool(name)) this.add(card.el);
    }
    return card;
  }

  /** A finished ask_* call from history, shown the way a live answered control ends up. */
  answeredQuestion(message: string, result: string, outcome: Outcome): void {
    const cancelled = outcome === "cancelled";
    this.add(
      h(
        "section",
        { class: "interrupt is-answered", attrs: { "aria-label": t.answeredQuestion } },
        h("div", { class: "interrupt-badge", text: cancelled ? t.cancelled : t.answered }),
        h(
          "div",
          { class: "interrupt-form" },
          h("p", { class: "interrupt-message", text: message }),
          h(
            "p",
            { class: "interrupt-answer" },
            h("span", { text: cancelled ? "– " : "✓ " }),
            cancelled ? t.cancelled : result.replace(ANSWER_PREFIX, ""),
          ),
        ),
      ),
    );
  }

  findTool(id: string | undefined | null): ToolCard | undefined {
    return id ? this.tools.get(id) : undefined;
  }

  /** Tool cards a stopped or failed run left unfinished (of the calls `only`, when given). */
  settleTools(state: ToolState, only?: ReadonlySet<string>): void {
    for (const card of this.tools.values()) {
      if (!card.finished && card.state !== "waiting" && (!only || only.has(card.id))) card.setState(state);
    }
  }

  notice(kind: "error" | "info", text: string, action?: NoticeAction): HTMLElement {
    const el = h(
      "div",
      {
        class: `notice notice-${kind}`,
        attrs: { role: kind === "error" ? "alert" : "status" },
      },
      h("span", { class: "notice-icon", attrs: { "aria-hidden": "true" } }),
      h("span", { class: "notice-text", text }),
      action
        ? h("button", {
            class: "btn btn-small btn-ghost",
            text: action.label,
            attrs: { type: "button" },
            on: { click: action.run },
          })
        : null,
    );
    this.add(el);
    return el;
  }

  addNode(el: HTMLElement): void {
    this.add(el);
  }

  private nearBottom(): boolean {
    const s = this.scroller;
    return s.scrollHeight - s.scrollTop - s.clientHeight < 80;
  }

  /** Jump to the newest content and follow it from now on. */
  scrollToBottom(): void {
    this.stuck = true;
    this.scroller.scrollTop = this.scroller.scrollHeight;
  }
}
