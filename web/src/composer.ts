// The foot of the page: the message box with its send and stop buttons, the progress line
// above it, and the choice a message typed during a run brings up (wait for the run, or
// stop it and send). It owns those elements; what sending does is the page's.

import { byId } from "./dom";
import { t } from "./i18n";

/** How a message sent during a run goes: after it (`enqueue`) or in its place (`interrupt`). */
export type Strategy = "enqueue" | "interrupt";

/** What the composer reflects of the page: a question pending, a thread open. */
export interface ComposerState {
  waiting: boolean;
  open: boolean;
}

export interface ComposerActions {
  /** Send `text` (during a run, only with a `strategy`). */
  send(text: string, strategy?: Strategy): void;
  /** "Stop and send": the run under way makes way for `text`. */
  sendInstead(text: string): void;
  stop(): void;
}

const narrow = window.matchMedia("(max-width: 520px)");

export class Composer {
  private readonly app = byId<HTMLDivElement>("app");
  private readonly form = byId<HTMLFormElement>("composer");
  private readonly input = byId<HTMLTextAreaElement>("message-input");
  private readonly sendButton = byId<HTMLButtonElement>("send-button");
  private readonly stopButton = byId<HTMLButtonElement>("stop-button");
  private readonly progress = byId<HTMLDivElement>("progress");
  private readonly progressText = byId<HTMLSpanElement>("progress-text");
  private readonly choice = byId<HTMLDivElement>("run-choice");

  constructor(
    private readonly state: () => ComposerState,
    actions: ComposerActions,
  ) {
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      actions.send(this.input.value);
    });
    this.input.addEventListener("keydown", (event) => {
      // Enter sends; Shift+Enter is a newline; Enter that confirms an IME candidate is neither.
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing && event.keyCode !== 229) {
        event.preventDefault();
        if (!this.sendButton.disabled) this.form.requestSubmit();
      }
    });
    this.input.addEventListener("input", () => this.autosize());
    narrow.addEventListener("change", () => this.refresh());
    this.stopButton.addEventListener("click", () => actions.stop());
    byId("choice-wait").addEventListener("click", () => actions.send(this.input.value, "enqueue"));
    byId("choice-interrupt").addEventListener("click", () => actions.sendInstead(this.input.value));
    byId("choice-cancel").addEventListener("click", () => this.hideChoice());
    this.choice.addEventListener("keydown", (event) => {
      if (event.key === "Escape") this.hideChoice();
    });
  }

  /** The box and its buttons as the page's state allows: closed while a question waits. */
  refresh(): void {
    const { waiting, open } = this.state();
    this.input.disabled = waiting;
    this.input.placeholder = narrow.matches
      ? waiting
        ? t.placeholderWaitingShort
        : t.placeholderShort
      : waiting
        ? t.placeholderWaiting
        : t.placeholder;
    this.sendButton.disabled = waiting || !open || !this.input.value.trim();
  }

  /** A run is under way on the open thread (or none is): the stop button, the progress line. */
  setRunning(running: boolean): void {
    this.app.classList.toggle("is-running", running);
    this.stopButton.hidden = !running;
    if (!running) {
      this.setProgress(null);
      this.hideChoice();
    }
    this.refresh();
  }

  setProgress(text: string | null): void {
    this.progress.hidden = text === null;
    if (text !== null) this.progressText.textContent = text;
  }

  focus(): void {
    // On touch screens focusing would pop the keyboard over the answer.
    if (window.matchMedia("(pointer: fine)").matches && !this.input.disabled) this.input.focus();
  }

  /** The message just sent leaves the box. */
  clear(): void {
    this.input.value = "";
    this.autosize();
  }

  /** A message that could not be sent comes back to the box, unless something new is there. */
  restore(text: string): void {
    if (this.input.value) return;
    this.input.value = text;
    this.autosize();
  }

  /** A message typed during a run: wait for the run, or stop it and send now? */
  offerChoice(): void {
    this.choice.hidden = false;
    byId("choice-wait").focus();
  }

  hideChoice(): void {
    if (this.choice.hidden) return;
    const focused = this.choice.contains(document.activeElement);
    this.choice.hidden = true;
    if (focused && !this.input.disabled) this.input.focus();
  }

  private autosize(): void {
    this.input.style.height = "auto";
    this.input.style.height = `${Math.min(this.input.scrollHeight, 200)}px`;
    this.refresh();
  }
}
