import { EventType, type Event, type Interrupt } from "@ag-ui/client";
import { describe, expect, it } from "vitest";
import { t } from "../src/i18n";
import { endStatus, foldRun, interruptsOf, NOTHING_YET, progressOf, started, type RunFacts } from "../src/runfold";

const QUESTION: Interrupt = { id: "i1", reason: "input", message: "哪个城市？" } as Interrupt;

const events = {
  started: { type: EventType.RUN_STARTED, threadId: "t", runId: "r1" },
  step: (stepName: string) => ({ type: EventType.STEP_STARTED, stepName }),
  text: { type: EventType.TEXT_MESSAGE_START, messageId: "m1", role: "assistant" },
  thought: { type: EventType.REASONING_MESSAGE_START, messageId: "m1:reasoning", role: "reasoning" },
  callStart: { type: EventType.TOOL_CALL_START, toolCallId: "c1", toolCallName: "get_weather" },
  callEnd: { type: EventType.TOOL_CALL_END, toolCallId: "c1" },
  finished: { type: EventType.RUN_FINISHED, threadId: "t", runId: "r1", outcome: { type: "success" } },
  asked: { type: EventType.RUN_FINISHED, threadId: "t", runId: "r1", outcome: { type: "interrupt", interrupts: [QUESTION] } },
  error: (code: string) => ({ type: EventType.RUN_ERROR, code, message: `failed: ${code}` }),
} as const;

function fold(...list: object[]): RunFacts {
  return list.reduce<RunFacts>((facts, event) => foldRun(facts, event as Event), NOTHING_YET);
}

describe("folding a run's events", () => {
  it("has it started at RUN_STARTED, with the server's run id", () => {
    expect(started(fold())).toBe(false);
    expect(fold(events.started)).toMatchObject({ runId: "r1", end: null });
  });

  it("ends with the run's questions when it stops for them", () => {
    const facts = fold(events.started, events.asked);
    expect(interruptsOf(facts)).toEqual([QUESTION]);
    expect(endStatus(facts)).toBe("waiting");
  });

  it("tells a cancel from a failure, and a success leaves no badge", () => {
    expect(endStatus(fold(events.started, events.error("cancelled")))).toBe("stopped");
    expect(fold(events.started, events.error("model_error")).end).toEqual({
      kind: "error",
      code: "model_error",
      message: "failed: model_error",
    });
    expect(endStatus(fold(events.started, events.error("model_error")))).toBe("failed");
    expect(endStatus(fold(events.started, events.finished))).toBeNull();
  });

  it("does not take the client's own abort for the run's end", () => {
    expect(fold(events.started, events.error("abort")).end).toBeNull();
  });

  it("keeps the first end: nothing after it changes what the run was", () => {
    const facts = fold(events.started, events.asked, events.error("cancelled"));
    expect(endStatus(facts)).toBe("waiting");
  });

  it("remembers each tool call's name from its start", () => {
    expect(fold(events.started, events.callStart).toolNames.get("c1")).toBe("get_weather");
  });
});

describe("the progress line", () => {
  const running = fold(events.started, events.callStart);

  it("follows the run: thinking, each step, reasoning, answering, a tool call being written then run", () => {
    expect(progressOf(events.started as Event, fold(events.started), false)).toBe(t.thinking);
    expect(progressOf(events.step("agent") as Event, running, false)).toBe(t.thinking);
    expect(progressOf(events.step("tools") as Event, running, false)).toBe(t.runningTools);
    expect(progressOf(events.step("other") as Event, running, false)).toBe(t.runningStep("other"));
    expect(progressOf(events.thought as Event, running, false)).toBe(t.thinking);
    expect(progressOf(events.text as Event, running, false)).toBe(t.answering);
    expect(progressOf(events.callStart as Event, running, false)).toBe(t.preparingCall("get_weather"));
    expect(progressOf(events.callEnd as Event, running, false)).toBe(t.runningStep("get_weather"));
  });

  it("stays as it is for events that say nothing new", () => {
    expect(progressOf({ type: EventType.TEXT_MESSAGE_CONTENT, messageId: "m1", delta: "x" } as Event, running, false)).toBeNull();
    expect(progressOf({ type: EventType.TOOL_CALL_END, toolCallId: "unknown" } as Event, running, false)).toBeNull();
  });

  it("says stopping, and only that, once the stop button was pressed", () => {
    expect(progressOf(events.started as Event, fold(events.started), true)).toBe(t.stopping);
    expect(progressOf(events.text as Event, running, true)).toBeNull();
    expect(progressOf(events.step("tools") as Event, running, true)).toBeNull();
  });
});
