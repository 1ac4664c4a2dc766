// The runs the page follows on the open thread, oldest first: the one under way, then
// messages queued behind it. A run is followed over @ag-ui/client's HttpAgent (one the
// page starts: POST /api/agents/{graph_id}) or a RunStream (one under way on the server,
// joined from its first event). Its events are folded (runfold.ts) and drawn as they come;
// what a run's start, end or failure means for the page is the page's (RunHost).
//
// A run the page stopped following (it moved to another thread) goes on on the server;
// its subscriber stays attached to a stream being aborted, so everything it would do
// passes one guard: a run that is no longer followed does nothing.

import {
  EventType,
  HttpAgent,
  randomUUID,
  type AgentSubscriber,
  type Event,
  type Message,
  type ResumeEntry,
  type RunAgentParameters,
} from "@ag-ui/client";
import {
  agentUrl,
  authHeaders,
  cancelRun,
  describeFailure,
  describeRunError,
  HttpError,
  RunStream,
  type Failure,
  type RunRecord,
} from "./api";
import type { Composer, Strategy } from "./composer";
import { textOf } from "./format";
import { t } from "./i18n";
import type { InterruptControl } from "./interrupts";
import { foldRun, NOTHING_YET, progressOf, started, type RunFacts } from "./runfold";
import type { ThreadEntry } from "./store";
import { toolDataOf } from "./tooldata";
import { outcomeOf, type ConversationView } from "./view";

const RETRY_BUSY_MS = 250;
const RETRY_BUSY_ATTEMPTS = 24;
const RETRY_BUSY_WINDOW_MS = 8000;

export interface RunInput {
  message?: Message;
  resume?: ResumeEntry[];
  strategy?: Strategy;
}

/** A run this page follows: one it started, or one it joined after a reload. */
export interface LiveRun {
  readonly agent: HttpAgent;
  readonly threadId: string;
  runId: string;
  /** What its events said so far. */
  facts: RunFacts;
  /** The stop button asked the server to cancel it. */
  stopping: boolean;
  /** Cancelled to make way for a message sent in its place: it ends without a notice. */
  quiet: boolean;
  /** The bubble of a message sent during another run; moved below that run's answer once
  this one starts. */
  readonly bubble: HTMLElement | null;
  /** Joined while queued: its message is in no view yet, so the thread is read again at its end. */
  readonly reread: boolean;
  /** What it was started with: a message, or the answers of `batch`'s questions. */
  readonly input: RunInput;
  readonly batch: InterruptControl[];
}

/** What a run's life means for the rest of the page. */
export interface RunHost {
  /** RUN_STARTED has come. */
  began(live: LiveRun): void;
  /** The run's stream ended (it is no longer followed). */
  ended(live: LiveRun): void;
  /** The run could not be started or followed. */
  failed(live: LiveRun, failure: Failure): void;
  /** The run ended with a RUN_ERROR other than a cancel. */
  runFailed(live: LiveRun, failure: Failure): void;
  /** A cancel the page asked for was refused. */
  cancelFailed(failure: Failure): void;
}

export class Runs {
  private runs: LiveRun[] = [];
  private lastStop = { threadId: "", at: 0 };

  constructor(
    private readonly view: ConversationView,
    private readonly composer: Composer,
    private readonly host: RunHost,
  ) {}

  get any(): boolean {
    return this.runs.length > 0;
  }

  /** The run under way (or the first queued one). */
  get first(): LiveRun | undefined {
    return this.runs[0];
  }

  get anyStarted(): boolean {
    return this.runs.some((live) => started(live.facts));
  }

  /** Some run the page follows belongs to `threadId`. */
  onThread(threadId: string): boolean {
    return this.runs.some((live) => live.threadId === threadId);
  }

  /** Start a run on `entry`. The server keeps the history: a run carries only what is new
   * (the message, or the answers), which also keeps long threads under the size limit. */
  async start(
    entry: ThreadEntry,
    input: RunInput,
    batch: InterruptControl[] = [],
    bubble: HTMLElement | null = null,
  ): Promise<void> {
    const agent = new HttpAgent({
      url: agentUrl(entry.graphId),
      headers: authHeaders(),
      threadId: entry.id,
      initialMessages: input.message ? [input.message] : [],
    });
    const live = this.track(agent, entry.id, randomUUID(), { bubble, input, batch });
    const params: RunAgentParameters = { runId: live.runId };
    if (input.resume) params.resume = input.resume;
    if (input.strategy) params.forwardedProps = { multitaskStrategy: input.strategy };
    await this.follow(live, params);
  }

  /** Follow a run the server has under way (found after a reload), from its first event. */
  async join(record: RunRecord): Promise<void> {
    const stream = new RunStream(record.threadId, record.runId);
    const live = this.track(stream, record.threadId, record.runId, { reread: record.status === "queued" });
    await this.follow(live, { runId: record.runId });
  }

  /** Stop following every run, for when the page moves to another thread.

  The runs go on on the server; opening the thread again joins them.
  */
  detach(): void {
    const runs = this.runs;
    this.runs = [];
    this.composer.setRunning(false);
    for (const live of runs) live.agent.abortRun();
  }

  /** The stop button: cancel the run under way through the API (its stream then ends). */
  stop(): void {
    const live = this.runs[0];
    if (!live || live.stopping) return;
    live.stopping = true;
    this.lastStop = { threadId: live.threadId, at: Date.now() };
    this.composer.setProgress(t.stopping);
    void this.cancel(live);
  }

  private track(
    agent: HttpAgent,
    threadId: string,
    runId: string,
    how: { bubble?: HTMLElement | null; reread?: boolean; input?: RunInput; batch?: InterruptControl[] },
  ): LiveRun {
    const live: LiveRun = {
      agent,
      threadId,
      runId,
      facts: NOTHING_YET,
      stopping: false,
      quiet: false,
      bubble: how.bubble ?? null,
      reread: how.reread ?? false,
      input: how.input ?? {},
      batch: how.batch ?? [],
    };
    this.runs.push(live);
    this.composer.setRunning(true);
    if (this.runs.length === 1) this.composer.setProgress(t.connecting);
    return live;
  }

  private follows(live: LiveRun): boolean {
    return this.runs.includes(live);
  }

  private async follow(live: LiveRun, params: RunAgentParameters): Promise<void> {
    try {
      for (let attempt = 1; ; attempt++) {
        try {
          await live.agent.runAgent(params, this.subscriber(live));
          break;
        } catch (err) {
          const unseen = this.follows(live) && !started(live.facts) && !live.stopping;
          if (!(unseen && this.justStopped(live.threadId, err, attempt))) throw err;
          await new Promise((resolve) => window.setTimeout(resolve, RETRY_BUSY_MS));
        }
      }
    } catch (err) {
      if (this.follows(live)) this.host.failed(live, describeFailure(err));
    } finally {
      if (this.follows(live)) {
        this.runs = this.runs.filter((other) => other !== live);
        this.host.ended(live);
      }
    }
  }

  /** The one guard: a run the page no longer follows draws and decides nothing. */
  private subscriber(live: LiveRun): AgentSubscriber {
    return {
      onEvent: ({ event }) => {
        if (this.follows(live)) this.apply(live, event as Event);
      },
    };
  }

  private apply(live: LiveRun, event: Event): void {
    const before = live.facts;
    live.facts = foldRun(before, event);
    this.draw(event);
    const progress = progressOf(event, live.facts, live.stopping);
    if (progress !== null) this.composer.setProgress(progress);
    if (!started(before) && started(live.facts)) this.begin(live);
    const end = live.facts.end;
    if (before.end === null && end?.kind === "error") {
      this.view.settleTools("stopped");
      this.host.runFailed(live, describeRunError(end.code, end.message));
    }
  }

  private begin(live: LiveRun): void {
    live.runId = live.facts.runId || live.runId;
    if (live.bubble) {
      live.bubble.classList.remove("is-queued");
      this.view.addNode(live.bubble);
    }
    this.host.began(live);
    if (live.stopping) void this.cancel(live); // stopped before the server had recorded it
  }

  /** What one event changes on screen. A joined run replays from its start: what the
   * history showed is rebuilt in its place, not repeated. */
  private draw(event: Event): void {
    const view = this.view;
    switch (event.type) {
      case EventType.REASONING_MESSAGE_START:
        view.reasoning(event.messageId).restart();
        break;
      case EventType.REASONING_MESSAGE_CONTENT:
        view.reasoning(event.messageId).append(event.delta);
        break;
      case EventType.REASONING_MESSAGE_END:
        view.reasoning(event.messageId).finish();
        break;
      case EventType.TEXT_MESSAGE_START:
        view.assistant(event.messageId).set("");
        break;
      case EventType.TEXT_MESSAGE_CONTENT:
        view.assistant(event.messageId).append(event.delta);
        break;
      case EventType.TEXT_MESSAGE_END:
        view.assistant(event.messageId).finish();
        break;
      case EventType.TOOL_CALL_START:
        view.tool(event.toolCallId, event.toolCallName).setArgs("");
        break;
      case EventType.TOOL_CALL_ARGS:
        view.tool(event.toolCallId).appendArgs(event.delta);
        break;
      case EventType.TOOL_CALL_END:
        view.tool(event.toolCallId).setState("running");
        break;
      case EventType.TOOL_CALL_RESULT:
        view
          .tool(event.toolCallId)
          .setResult(textOf(event.content), outcomeOf(event.metadata), toolDataOf(event.metadata));
        break;
    }
  }

  private async cancel(live: LiveRun): Promise<void> {
    try {
      await cancelRun(live.threadId, live.runId);
    } catch (err) {
      // Not recorded yet (its request is still on the way): RUN_STARTED cancels it.
      if (!started(live.facts) && err instanceof HttpError && err.status === 404) return;
      live.stopping = false;
      if (!this.follows(live)) return;
      this.composer.setProgress(t.running);
      this.host.cancelFailed(describeFailure(err));
    }
  }

  /** A 409 "thread busy" right after this page stopped a run on the thread.

  The server lets go of a stopped run once it has written what the run left, which can
  be a moment after its stream ended; "stop, then send at once" should just work.
  */
  private justStopped(threadId: string, err: unknown, attempt: number): boolean {
    const failure = err as { status?: unknown; payload?: { code?: unknown } };
    return (
      failure?.status === 409 &&
      failure.payload?.code === "thread_busy" &&
      this.lastStop.threadId === threadId &&
      Date.now() - this.lastStop.at < RETRY_BUSY_WINDOW_MS &&
      attempt < RETRY_BUSY_ATTEMPTS
    );
  }
}
