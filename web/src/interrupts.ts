// One control per pending interrupt, built from its payload (metadata.payload; docs/api.md):
// input, select, multi_select and confirm. The control reports an answer or a cancel;
// the caller sends it as a `resume` entry and tells the control how it went.

import type { Interrupt } from "@ag-ui/client";
import { h, uid } from "./dom";
import { t } from "./i18n";

export interface Option {
  label: string;
  value: string;
}

export interface Payload {
  type: "input" | "select" | "multi_select" | "confirm";
  message: string;
  placeholder?: string;
  options?: Option[];
  min?: number;
  tool?: string;
  args?: Record<string, unknown>;
  risk?: "safe" | "sensitive" | "destructive";
  error?: string;
}

export interface InterruptHandlers {
  /** A resolved answer: `value` goes out as `payload: {value}`; `summary` is shown after. */
  answer(control: InterruptControl, value: unknown, summary: string): void;
  cancel(control: InterruptControl): void;
}

const TYPES = new Set(["input", "select", "multi_select", "confirm"]);

const BADGES: Record<Payload["type"], string> = {
  input: t.badgeInput,
  select: t.badgeSelect,
  multi_select: t.badgeMulti,
  confirm: t.badgeConfirm,
};

const RISKS: Record<string, string> = {
  safe: t.riskSafe,
  sensitive: t.riskSensitive,
  destructive: t.riskDestructive,
};

function asOptions(value: unknown): Option[] {
  if (!Array.isArray(value)) return [];
  return value.flatMap((item): Option[] => {
    if (typeof item === "string") return [{ label: item, value: item }];
    if (item && typeof item === "object" && "value" in item) {
      const v = String((item as { value: unknown }).value);
      const label = (item as { label?: unknown }).label;
      return [{ value: v, label: typeof label === "string" && label ? label : v }];
    }
    return [];
  });
}

/** The interrupt's payload, tolerating missing fields (the message falls back to the interrupt's). */
export function payloadOf(interrupt: Interrupt): Payload {
  const raw = (interrupt.metadata as { payload?: unknown } | undefined)?.payload;
  const p = (raw && typeof raw === "object" ? raw : {}) as Record<string, unknown>;
  const kind = typeof p.type === "string" && TYPES.has(p.type) ? p.type : interrupt.reason;
  const type = (TYPES.has(kind ?? "") ? kind : "input") as Payload["type"];
  const args = p.args && typeof p.args === "object" ? (p.args as Record<string, unknown>) : undefined;
  return {
    type,
    message: String(p.message ?? interrupt.message ?? t.pleaseAnswer),
    placeholder: typeof p.placeholder === "string" ? p.placeholder : undefined,
    options: asOptions(p.options),
    min: typeof p.min === "number" ? p.min : 1,
    tool: typeof p.tool === "string" ? p.tool : undefined,
    args,
    risk: p.risk === "safe" || p.risk === "sensitive" || p.risk === "destructive" ? p.risk : undefined,
    error: typeof p.error === "string" ? p.error : undefined,
  };
}

export class InterruptControl {
  readonly el: HTMLElement;
  readonly payload: Payload;
  private readonly form: HTMLFormElement;
  private readonly errorEl: HTMLElement;
  private readonly actions: HTMLElement;
  private readonly submitButton: HTMLButtonElement;
  private readonly cancelButton: HTMLButtonElement;
  private readonly fields: HTMLInputElement[] = [];
  private readonly status: HTMLElement;
  private badge!: HTMLElement;
  private busy = false;
  private validity: () => boolean = () => true;

  constructor(
    readonly interrupt: Interrupt,
    private readonly handlers: InterruptHandlers,
  ) {
    this.payload = payloadOf(interrupt);
    const p = this.payload;
    this.errorEl = h("p", { class: "interrupt-error", attrs: { role: "alert", hidden: true } });
    this.status = h("p", { class: "interrupt-status", attrs: { role: "status" } });
    this.submitButton = h("button", { class: "btn btn-primary", attrs: { type: "submit" } });
    this.cancelButton = h("button", {
      class: "btn btn-ghost",
      attrs: { type: "button" },
      on: { click: () => this.onCancel() },
    });
    this.actions = h("div", { class: "interrupt-actions" }, this.cancelButton, this.submitButton);
    this.form = h("form", {
      class: "interrupt-form",
      attrs: { novalidate: true },
      on: {
        submit: (event) => {
          event.preventDefault();
          this.onSubmit();
        },
      },
    });

    const body = this.build(p);
    this.form.append(...body, this.errorEl, this.actions);
    this.el = h(
      "section",
      {
        class: `interrupt interrupt-${p.type}${p.risk === "destructive" ? " is-destructive" : ""}`,
        attrs: { "data-interrupt-id": interrupt.id, "data-reason": p.type, "aria-label": BADGES[p.type] },
      },
      (this.badge = h("div", { class: "interrupt-badge", text: BADGES[p.type] })),
      this.form,
      this.status,
    );
    if (p.error) this.showError(p.error);
    this.refresh();
  }

  private build(p: Payload): HTMLElement[] {
    switch (p.type) {
      case "select":
        return this.buildChoices(p, false);
      case "multi_select":
        return this.buildChoices(p, true);
      case "confirm":
        return this.buildConfirm(p);
      default:
        return this.buildInput(p);
    }
  }

  private buildInput(p: Payload): HTMLElement[] {
    const id = uid("answer");
    const input = h("input", {
      class: "text-input",
      attrs: {
        id,
        type: "text",
        name: "value",
        autocomplete: "off",
        placeholder: p.placeholder || t.yourAnswer,
        "aria-required": "true",
      },
      on: { input: () => this.refresh() },
    });
    this.fields.push(input);
    this.validity = () => input.value.trim().length > 0;
    this.submitButton.textContent = t.submit;
    this.cancelButton.textContent = t.cancel;
    return [h("label", { class: "interrupt-message", text: p.message, attrs: { for: id } }), input];
  }

  private buildChoices(p: Payload, multi: boolean): HTMLElement[] {
    const name = uid("choice");
    const min = Math.max(0, p.min ?? 1);
    const counter = h("span", { class: "choice-count" });
    const options = (p.options ?? []).map((option) => {
      const input = h("input", {
        attrs: { type: multi ? "checkbox" : "radio", name, value: option.value },
        on: {
          change: () => this.refresh(),
          keydown: (event) => {
            // Radios and checkboxes do not submit on Enter by themselves.
            if (event.key === "Enter") {
              event.preventDefault();
              this.form.requestSubmit();
            }
          },
        },
      });
      this.fields.push(input);
      // "平安银行 000001.SZ": the name reads first, the code beside it in grey.
      const cut = option.label.lastIndexOf(" ");
      const tail = cut > 0 ? option.label.slice(cut + 1) : "";
      const isCode = option.label !== option.value && /^[0-9A-Z.]+$/.test(tail);
      const main = isCode ? option.label.slice(0, cut) : option.label;
      const detail = isCode ? tail : "";
      return h(
        "label",
        { class: "option" },
        input,
        h("span", { class: "option-mark", attrs: { "aria-hidden": "true" } }),
        h(
          "span",
          { class: "option-text" },
          h("span", { class: "option-label", text: main }),
          detail ? h("span", { class: "option-detail", text: detail }) : null,
        ),
      );
    });
    const checked = () => this.fields.filter((f) => f.checked).length;
    this.validity = () => (multi ? checked() >= min : checked() === 1);
    this.submitButton.textContent = t.submit;
    this.cancelButton.textContent = t.cancel;
    const legend = h("legend", { class: "interrupt-message", text: p.message });
    const hint = multi
      ? h("p", { class: "choice-hint" }, t.atLeast(min), counter)
      : null;
    if (multi) {
      const update = () => {
        counter.textContent = t.chosen(checked());
      };
      update();
      this.fields.forEach((f) => f.addEventListener("change", update));
    }
    return [
      h(
        "fieldset",
        { class: `choices${multi ? " choices-multi" : ""}` },
        legend,
        hint,
        h("div", { class: "options" }, ...options),
      ),
    ];
  }

  private buildConfirm(p: Payload): HTMLElement[] {
    const risk = p.risk ?? "sensitive";
    this.submitButton.textContent = risk === "destructive" ? t.approveDestructive : t.approve;
    this.submitButton.className = risk === "destructive" ? "btn btn-danger" : "btn btn-primary";
    this.cancelButton.textContent = t.decline;
    const rows: HTMLElement[] = [h("p", { class: "interrupt-message", text: p.message })];
    if (p.tool || p.risk) {
      rows.push(
        h(
          "dl",
          { class: "confirm-facts" },
          p.tool ? h("dt", { text: t.tool }) : null,
          p.tool ? h("dd", {}, h("code", { class: "tool-name", text: p.tool })) : null,
          h("dt", { text: t.risk }),
          h(
            "dd",
            {},
            h("span", { class: `risk risk-${risk}`, text: RISKS[risk] ?? risk }),
          ),
        ),
      );
    }
    if (p.args && Object.keys(p.args).length) {
      rows.push(
        h(
          "div",
          { class: "confirm-args" },
          h("div", { class: "tool-section-title", text: t.args }),
          h("pre", { class: "tool-pre", text: JSON.stringify(p.args, null, 2) }),
        ),
      );
    }
    return rows;
  }

  private refresh(): void {
    const ok = this.payload.type === "confirm" || this.validity();
    this.submitButton.disabled = this.busy || !ok;
    this.cancelButton.disabled = this.busy;
    for (const field of this.fields) field.disabled = this.busy;
  }

  private onSubmit(): void {
    if (this.busy) return;
    const p = this.payload;
    if (p.type === "confirm") {
      this.handlers.answer(this, true, t.approved);
      return;
    }
    if (!this.validity()) {
      const hint = {
        input: t.needAnswer,
        select: t.needChoice,
        multi_select: t.needChoices(Math.max(0, p.min ?? 1)),
        confirm: "",
      }[p.type];
      this.showError(hint);
      return;
    }
    if (p.type === "input") {
      const value = this.fields[0].value.trim();
      this.handlers.answer(this, value, value);
      return;
    }
    const chosen = this.fields.filter((f) => f.checked).map((f) => f.value);
    const labels = chosen.map((v) => p.options?.find((o) => o.value === v)?.label ?? v);
    if (p.type === "select") this.handlers.answer(this, chosen[0], labels[0]);
    else this.handlers.answer(this, chosen, labels.join(t.listSep));
  }

  private onCancel(): void {
    if (this.busy) return;
    if (this.payload.type === "confirm") this.handlers.answer(this, false, t.declined);
    else this.handlers.cancel(this);
  }

  get id(): string {
    return this.interrupt.id;
  }

  setBusy(busy: boolean, text = ""): void {
    this.busy = busy;
    this.el.classList.toggle("is-busy", busy);
    this.status.textContent = text;
    this.refresh();
  }

  showError(text: string, action?: { label: string; run: () => void }): void {
    this.errorEl.replaceChildren(text);
    if (action) {
      this.errorEl.append(
        " ",
        h("button", {
          class: "link-btn",
          text: action.label,
          attrs: { type: "button" },
          on: { click: action.run },
        }),
      );
    }
    this.errorEl.hidden = !text;
  }

  /** The answer was taken: the question stays, the control becomes a one-line record. */
  markAnswered(summary: string, cancelled = false): void {
    this.busy = true;
    this.el.classList.remove("is-busy");
    this.el.classList.add("is-answered");
    this.badge.textContent = cancelled ? t.cancelled : t.answered;
    this.showError("");
    this.status.textContent = "";
    this.actions.remove();
    for (const field of this.fields) field.disabled = true;
    this.form.append(h("p", { class: "interrupt-answer" }, h("span", { text: "✓ " }), summary));
  }

  focus(): void {
    // A confirm starts on "decline": a stray Enter must never approve a risky tool.
    const target = this.fields.find((f) => f.checked) ?? this.fields[0] ?? this.cancelButton;
    target.focus({ preventScroll: true });
  }
}
