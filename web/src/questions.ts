// The questions pending on the open thread (one control per interrupt) and the answers
// given so far: the run resumes once every question has one, with all of them at once
// (docs/api.md, "Interrupts"). No DOM here: the controls are whatever the page made.

import type { ResumeEntry } from "@ag-ui/client";

export interface Answer {
  entry: ResumeEntry;
  /** What the answered control shows afterwards. */
  summary: string;
  cancelled: boolean;
}

/** What an answer leads to: the next question still open, or the resume for them all. */
export type Answered<C> = { next: C; left: number } | { batch: C[]; resume: ResumeEntry[] };

export class Questions<C extends { readonly id: string }> {
  private readonly controls = new Map<string, C>();
  private readonly answers = new Map<string, Answer>();

  /** Some question waits for an answer: the composer is closed meanwhile. */
  get pending(): boolean {
    return this.controls.size > 0;
  }

  get first(): C | undefined {
    return this.controls.values().next().value;
  }

  /** The thread's questions now (none: it asks nothing); earlier answers are dropped. */
  replace(controls: C[]): void {
    this.clear();
    for (const control of controls) this.controls.set(control.id, control);
  }

  clear(): void {
    this.controls.clear();
    this.answers.clear();
  }

  /** Keep `answer` for question `id`; what comes next. */
  answer(id: string, answer: Answer): Answered<C> {
    this.answers.set(id, answer);
    const open = [...this.controls.values()].filter((control) => !this.answers.has(control.id));
    if (open.length) return { next: open[0], left: open.length };
    const batch = [...this.controls.values()];
    return { batch, resume: batch.map((control) => this.answers.get(control.id)!.entry) };
  }

  answerOf(id: string): Answer | undefined {
    return this.answers.get(id);
  }

  /** The server refused the answers: the questions stay, to be answered again. */
  dropAnswers(): void {
    this.answers.clear();
  }
}
