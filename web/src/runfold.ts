// A run's AG-UI events folded into what the page knows of the run (has it started, how
// did it end, what are its tool calls called) and into the words of the progress line.
// Pure functions: the page draws; the unit tests (web/tests/) fold event lists.

import { EventType, type Event, type Interrupt } from "@ag-ui/client";
import { t } from "./i18n";
import type { ThreadStatus } from "./store";

/** How a run ended: its first RUN_FINISHED or RUN_ERROR (nothing follows either). */
export type RunEnd =
  | { kind: "success" }
  | { kind: "interrupt"; interrupts: Interrupt[] }
  | { kind: "cancelled" }
  | { kind: "error"; code: string | undefined; message: string };

export interface RunFacts {
  /** RUN_STARTED has arrived (with the run id the server gave). */
  readonly runId: string | null;
  readonly end: RunEnd | null;
  /** Tool call id -> tool name, from TOOL_CALL_START. */
  readonly toolNames: ReadonlyMap<string, string>;
}

export const NOTHING_YET: RunFacts = { runId: null, end: null, toolNames: new Map() };

// HttpAgent's own RUN_ERROR for a stream the page stopped reading: not the run's end.
const ABORT = "abort";
const CANCELLED = "cancelled";

/** What `facts` become once `event` has come. */
export function foldRun(facts: RunFacts, event: Event): RunFacts {
  if (facts.end !== null) return facts;
  switch (event.type) {
    case EventType.RUN_STARTED:
      return { ...facts, runId: event.runId ?? "" };
    case EventType.TOOL_CALL_START: {
      const toolNames = new Map(facts.toolNames).set(event.toolCallId, event.toolCallName);
      return { ...facts, toolNames };
    }
    case EventType.RUN_FINISHED: {
      const outcome = event.outcome;
      return outcome?.type === "interrupt"
        ? { ...facts, end: { kind: "interrupt", interrupts: outcome.interrupts } }
        : { ...facts, end: { kind: "success" } };
    }
    case EventType.RUN_ERROR: {
      const { code, message } = event;
      if (code === ABORT) return facts;
      const end: RunEnd = code === CANCELLED ? { kind: "cancelled" } : { kind: "error", code, message };
      return { ...facts, end };
    }
    default:
      return facts;
  }
}

export function started(facts: RunFacts): boolean {
  return facts.runId !== null;
}

/** The questions the run stopped for (none unless it ended with an interrupt). */
export function interruptsOf(facts: RunFacts): Interrupt[] {
  return facts.end?.kind === "interrupt" ? facts.end.interrupts : [];
}

/** The badge the run leaves its thread with. */
export function endStatus(facts: RunFacts): ThreadStatus {
  switch (facts.end?.kind) {
    case "interrupt":
      return facts.end.interrupts.length ? "waiting" : null;
    case "cancelled":
      return "stopped";
    case "error":
      return "failed";
    default:
      return null;
  }
}

const STEP_TEXT: Record<string, string> = {
  agent: t.thinking,
  tools: t.runningTools,
};

/** What the progress line says once `event` has come (`facts`: with it folded in); null:
 * it stays as it is. While the run is `stopping` the line says so and nothing else. */
export function progressOf(event: Event, facts: RunFacts, stopping: boolean): string | null {
  if (event.type === EventType.RUN_STARTED) return stopping ? t.stopping : t.thinking;
  if (stopping) return null;
  switch (event.type) {
    case EventType.STEP_STARTED:
      return STEP_TEXT[event.stepName] ?? t.runningStep(event.stepName);
    case EventType.REASONING_MESSAGE_START:
      return t.thinking;
    case EventType.TEXT_MESSAGE_START:
      return t.answering;
    case EventType.TOOL_CALL_START:
      return t.preparingCall(event.toolCallName);
    case EventType.TOOL_CALL_END: {
      const name = facts.toolNames.get(event.toolCallId);
      return name === undefined ? null : t.runningStep(name);
    }
    default:
      return null;
  }
}
