// The page controller: AG-UI runs over @ag-ui/client's HttpAgent against
// POST /api/agents/{graph_id}; threads restored from GET /api/threads/{id}, and a run
// still under way there followed again from its recorded events (.../runs/{id}/stream).
// The sidebar lists the server's threads (GET /api/threads, read again every few
// seconds while the page is visible), so threads made elsewhere show up with their state.

import {
  HttpAgent,
  randomUUID,
  type AgentSubscriber,
  type Interrupt,
  type Message,
  type ResumeEntry,
  type RunAgentParameters,
} from "@ag-ui/client";
import {
  agentUrl,
  authHeaders,
  cancelRun,
  deleteThread,
  describeFailure,
  describeRunError,
  getThread,
  HttpError,
  isActive,
  listGraphs,
  listRuns,
  listThreads,
  renameThread,
  RunStream,
  type Failure,
  type GraphInfo,
  type RunRecord,
  type ThreadSummary,
  type ThreadView,
} from "./api";
import { byId } from "./dom";
import { applyStatic, t } from "./i18n";
import { InterruptControl, type InterruptHandlers } from "./interrupts";
import { badgeOf, renderGraphs, ThreadList } from "./sidebar";
import * as store from "./store";
import type { ThreadEntry, ThreadStatus } from "./store";
import { toolDataOf } from "./tooldata";
import { ConversationView, isAskTool, outcomeOf } from "./view";
import "./style.css";

applyStatic();

const STEP_TEXT: Record<string, string> = {
  agent: t.thinking,
  tools: t.runningTools,
};

const RETRY_BUSY_MS = 250;
const RETRY_BUSY_ATTEMPTS = 24;
const RETRY_BUSY_WINDOW_MS = 8000;

// How often the sidebar reads the server's thread list while the page is visible.
const THREADS_POLL_MS = 4000;
const THREADS_LIMIT = 50;
// A thread this page just started may not be in a list read a moment earlier.
const NEW_THREAD_GRACE_MS = 30_000;
// A thread's state this page saw itself wins over the server's list for this long.
const LOCAL_STATUS_MS = 1500;

const narrow = window.matchMedia("(max-width: 520px)");

const ui = {
  app: byId<HTMLDivElement>("app"),
  sidebar: byId<HTMLElement>("sidebar"),
  scrim: byId<HTMLDivElement>("scrim"),
  openSidebar: byId<HTMLButtonElement>("open-sidebar"),
  closeSidebar: byId<HTMLButtonElement>("close-sidebar"),
  newThread: byId<HTMLButtonElement>("new-thread"),
  threadList: byId<HTMLUListElement>("thread-list"),
  threadEmpty: byId<HTMLParagraphElement>("thread-empty"),
  settings: byId<HTMLDetailsElement>("settings"),
  settingsForm: byId<HTMLFormElement>("settings-form"),
  apiKey: byId<HTMLInputElement>("api-key"),
  settingsSaved: byId<HTMLSpanElement>("settings-saved"),
  agentSelect: byId<HTMLSelectElement>("agent-select"),
  agentPicker: byId<HTMLDivElement>("agent-picker"),
  title: byId<HTMLHeadingElement>("thread-title"),
  conversation: byId<HTMLElement>("conversation"),
  messages: byId<HTMLDivElement>("messages"),
  progress: byId<HTMLDivElement>("progress"),
  progressText: byId<HTMLSpanElement>("progress-text"),
  composer: byId<HTMLFormElement>("composer"),
  input: byId<HTMLTextAreaElement>("message-input"),
  send: byId<HTMLButtonElement>("send-button"),
  stop: byId<HTMLButtonElement>("stop-button"),
  choice: byId<HTMLDivElement>("run-choice"),
  choiceWait: byId<HTMLButtonElement>("choice-wait"),
  choiceInterrupt: byId<HTMLButtonElement>("choice-interrupt"),
  choiceCancel: byId<HTMLButtonElement>("choice-cancel"),
};

const view = new ConversationView(ui.messages, ui.conversation);

interface Answer {
  entry: ResumeEntry;
  summary: string;
  cancelled: boolean;
}

const state = {
  graphs: [] as GraphInfo[],
  threads: store.loadThreads(),
  current: null as ThreadEntry | null,
  // The runs this page follows on the open thread, oldest first: the one under way,
  // then messages queued behind it.
  runs: [] as LiveRun[],
  lastStop: { threadId: "", at: 0 },
  loading: 0,
  controls: new Map<string, InterruptControl>(),
  answers: new Map<string, Answer>(),
  // Threads this page started, by when: kept in the list until the server lists them.
  started: new Map<string, number>(),
  // When this page last learnt a thread's state itself: server lists read before that
  // are older news for that thread.
  statusAt: new Map<string, number>(),
  listing: false,
};

// --- threads -----------------------------------------------------------------------

const threadList = new ThreadList(ui.threadList, ui.threadEmpty, {
  open: (entry) => {
    closeSidebar();
    if (entry.id !== state.current?.id) void openThread(entry);
  },
  remove: (entry) => void removeThread(entry),
  rename: (entry, title) => rename(entry, title),
});

function saveThreads(): void {
  store.saveThreads(state.threads);
  threadList.render(state.threads, state.current?.id ?? null);
}

/** What this page knows of a thread's state right now (its runs, its questions). */
function setStatus(threadId: string, status: ThreadStatus): void {
  state.statusAt.set(threadId, Date.now());
  const entry = known(threadId) ?? (state.current?.id === threadId ? state.current : undefined);
  if (!entry || entry.status === status) return;
  entry.status = status;
  saveThreads();
}

/** Read the server's thread list (every agent's) into the sidebar. */
async function refreshThreads(): Promise<void> {
  if (state.listing || !state.graphs.length) return;
  state.listing = true;
  const asked = Date.now();
  let summaries: ThreadSummary[];
  try {
    summaries = await listThreads(null, THREADS_LIMIT);
  } catch {
    return; // an older server, a lost connection: the list the page has stays
  } finally {
    state.listing = false;
  }
  const listed = new Map(summaries.map((summary) => [summary.threadId, summary]));
  const threads: ThreadEntry[] = [];
  for (const summary of listed.values()) {
    const entry = known(summary.threadId) ?? {
      id: summary.threadId,
      graphId: summary.graphId,
      title: "",
      updatedAt: 0,
    };
    entry.graphId = summary.graphId;
    entry.title = summary.title || entry.title;
    entry.updatedAt = Math.max(summary.updatedAt, entry.updatedAt);
    // What this page saw itself a moment ago may not have reached the list yet.
    if ((state.statusAt.get(entry.id) ?? 0) < asked - LOCAL_STATUS_MS) {
      entry.status = badgeOf(summary.status);
    }
    state.started.delete(entry.id);
    threads.push(entry);
  }
  // Not listed: deleted elsewhere, unless this page started it a moment ago.
  for (const entry of state.threads) {
    const since = state.started.get(entry.id);
    if (!listed.has(entry.id) && since !== undefined && Date.now() - since < NEW_THREAD_GRACE_MS) {
      threads.push(entry);
    }
  }
  state.threads = threads;
  const current = state.current;
  if (current && known(current.id) && current.title !== ui.title.textContent) {
    ui.title.textContent = current.title || t.newThread;
  }
  saveThreads();
}

async function rename(entry: ThreadEntry, title: string): Promise<boolean> {
  try {
    const summary = await renameThread(entry.id, title);
    entry.title = summary?.title || title;
  } catch (err) {
    showFailure(describeFailure(err));
    return false;
  }
  if (state.current?.id === entry.id) {
    state.current.title = entry.title;
    ui.title.textContent = entry.title;
  }
  saveThreads();
  return true;
}

function known(id: string): ThreadEntry | undefined {
  return state.threads.find((t) => t.id === id);
}

function defaultGraph(): string {
  const last = store.lastGraph.get();
  if (last && state.graphs.some((g) => g.id === last)) return last;
  return state.graphs[0]?.id ?? "weather";
}

function graphInfo(id: string): GraphInfo | undefined {
  return state.graphs.find((g) => g.id === id);
}

function setCurrent(entry: ThreadEntry): void {
  state.current = entry;
  store.currentThread.set(known(entry.id) ? entry.id : null);
  ui.title.textContent = entry.title || t.newThread;
  if (state.graphs.length) renderGraphs(ui.agentSelect, state.graphs, entry.graphId);
  saveThreads();
}

function resetInterrupts(): void {
  state.controls.clear();
  state.answers.clear();
}

/** A fresh conversation with `graphId`; it joins the list once its first message is sent. */
function newDraft(graphId = defaultGraph()): void {
  detachRuns();
  state.loading += 1;
  resetInterrupts();
  setCurrent({ id: randomUUID(), graphId, title: "", updatedAt: Date.now() });
  view.clear();
  view.showWelcome(graphInfo(graphId), (text) => void send(text));
  refreshComposer();
  focusComposer();
}

async function openThread(entry: ThreadEntry): Promise<void> {
  detachRuns();
  const token = ++state.loading;
  resetInterrupts();
  setCurrent(entry);
  view.clear();
  refreshComposer();
  ui.messages.setAttribute("aria-busy", "true");
  try {
    const [thread, runs] = await Promise.all([getThread(entry.id), listRuns(entry.id)]);
    if (token !== state.loading) return;
    const active = runs.filter(isActive).reverse();
    showThread(entry, thread, active.length > 0);
    for (const run of active) void joinRun(run);
  } catch (err) {
    if (token !== state.loading) return;
    view.clear();
    showFailure(describeFailure(err), { label: t.retry, run: () => void openThread(entry) });
  } finally {
    if (token === state.loading) {
      ui.messages.removeAttribute("aria-busy");
      refreshComposer();
    }
  }
}

/** The thread as the server has it; `busy`: a run is under way and will bring the rest. */
function showThread(entry: ThreadEntry, thread: ThreadView | null, busy: boolean): void {
  view.clear();
  if (!busy && (!thread || (!thread.messages.length && !thread.interrupts.length))) {
    view.showWelcome(graphInfo(entry.graphId), (text) => void send(text));
    return;
  }
  if (thread?.graphId && thread.graphId !== entry.graphId) {
    entry.graphId = thread.graphId;
    setCurrent(entry);
  }
  renderHistory(thread?.messages ?? [], !busy);
  // A run under way asks its own questions, in its RUN_FINISHED, if it stops for them.
  if (!busy) showInterrupts(thread?.interrupts ?? []);
  view.scrollToBottom();
}

async function removeThread(entry: ThreadEntry): Promise<void> {
  try {
    await deleteThread(entry.id);
  } catch (err) {
    showFailure(describeFailure(err));
    return;
  }
  state.threads = state.threads.filter((other) => other.id !== entry.id);
  state.started.delete(entry.id);
  if (entry.id === state.current?.id) newDraft(entry.graphId);
  else saveThreads();
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((part) => (part && typeof part === "object" && "text" in part ? String(part.text) : ""))
      .join("");
  }
  return "";
}

function questionOf(args: string): string {
  try {
    const parsed = JSON.parse(args) as { message?: unknown };
    if (typeof parsed.message === "string") return parsed.message;
  } catch {
    // fall through to a neutral title
  }
  return t.askedYou;
}

/** `settle`: no run is under way, so a tool call without a result was left unfinished. */
function renderHistory(messages: Message[], settle = true): void {
  for (const message of messages) {
    if (message.role === "user") {
      view.addUser(textOf(message.content), message.id);
    } else if (message.role === "reasoning") {
      // Folded above the reply it led to (the server sends it just before that reply).
      const thought = textOf(message.content);
      if (thought) view.reasoning(message.id).set(thought);
    } else if (message.role === "assistant") {
      const text = textOf(message.content);
      if (text) view.assistant(message.id).set(text);
      for (const call of message.toolCalls ?? []) {
        view.tool(call.id, call.function.name).setArgs(call.function.arguments);
      }
    } else if (message.role === "tool") {
      const card = view.tool(message.toolCallId);
      const result = textOf(message.content);
      const outcome = outcomeOf(message.metadata, message.error);
      card.setResult(result, outcome, toolDataOf(message.metadata));
      if (isAskTool(card.name)) view.answeredQuestion(questionOf(card.argsText), result, outcome);
    }
  }
  if (settle) view.settleTools("stopped");
}

// --- interrupts --------------------------------------------------------------------

const interruptHandlers: InterruptHandlers = {
  answer(control, value, summary) {
    collect(control, { interruptId: control.id, status: "resolved", payload: { value } }, summary);
  },
  cancel(control) {
    collect(control, { interruptId: control.id, status: "cancelled" }, t.cancelled, true);
  },
};

function showInterrupts(interrupts: Interrupt[]): void {
  resetInterrupts();
  for (const interrupt of interrupts) {
    const control = new InterruptControl(interrupt, interruptHandlers);
    state.controls.set(interrupt.id, control);
    view.findTool(interrupt.toolCallId)?.setState("waiting");
    view.addNode(control.el);
  }
  refreshComposer();
  const first = state.controls.values().next().value;
  if (first) {
    if (state.current) setStatus(state.current.id, "waiting");
    view.scrollToBottom();
    first.focus();
  }
}

/** Keep an answer; once every pending interrupt has one, resume with all of them. */
function collect(control: InterruptControl, entry: ResumeEntry, summary: string, cancelled = false): void {
  control.showError("");
  state.answers.set(control.id, { entry, summary, cancelled });
  const waiting = [...state.controls.keys()].filter((id) => !state.answers.has(id));
  if (waiting.length) {
    control.setBusy(true, t.recorded(waiting.length));
    // Keyboard users go on to the next question rather than back to the page's top.
    state.controls.get(waiting[0])?.focus();
    return;
  }
  const batch = [...state.controls.values()];
  for (const c of batch) c.setBusy(true, t.submitting);
  void startRun({ resume: batch.map((c) => state.answers.get(c.id)!.entry) }, batch);
}

// --- runs --------------------------------------------------------------------------

/** How a message sent during a run goes: after it (`enqueue`) or in its place (`interrupt`). */
type Strategy = "enqueue" | "interrupt";

interface RunInput {
  message?: Message;
  resume?: ResumeEntry[];
  strategy?: Strategy;
}

/** A run this page follows: one it started, or one it joined after a reload. */
interface LiveRun {
  agent: HttpAgent;
  threadId: string;
  runId: string;
  /** RUN_STARTED has arrived. */
  started: boolean;
  /** The stop button asked the server to cancel it. */
  stopping: boolean;
  /** It ended cancelled: stopped here, in another tab, or by a message sent in its place. */
  cancelled: boolean;
  /** Cancelled to make way for a message sent in its place: it ends without a notice. */
  quiet: boolean;
  /** The bubble of a message sent during another run; moved below that run's answer once
  this one starts. */
  bubble: HTMLElement | null;
  /** Joined while queued: its message is in no view yet, so the thread is read again at its end. */
  reread: boolean;
  /** It ended with a RUN_ERROR other than a cancel. */
  failed: boolean;
  interrupts: Interrupt[];
}

function syncRunning(): void {
  const running = state.runs.length > 0;
  ui.app.classList.toggle("is-running", running);
  ui.stop.hidden = !running;
  if (!running) {
    setProgress(null);
    hideChoice();
  }
  refreshComposer();
}

function setProgress(text: string | null): void {
  ui.progress.hidden = text === null;
  if (text !== null) ui.progressText.textContent = text;
}

function refreshComposer(): void {
  const waiting = state.controls.size > 0;
  ui.input.disabled = waiting;
  ui.input.placeholder = narrow.matches
    ? waiting
      ? t.placeholderWaitingShort
      : t.placeholderShort
    : waiting
      ? t.placeholderWaiting
      : t.placeholder;
  ui.send.disabled = waiting || !state.current || !ui.input.value.trim();
  ui.agentPicker.hidden = !state.graphs.length;
}

/** Stop listening to this thread's runs, for when the page moves to another thread.

The runs go on on the server; opening the thread again joins them.
*/
function detachRuns(): void {
  const runs = state.runs;
  state.runs = [];
  syncRunning();
  for (const live of runs) live.agent.abortRun();
}

/** The stop button: cancel the run under way through the API (its stream then ends). */
function stopRun(): void {
  const live = state.runs[0];
  if (!live || live.stopping) return;
  live.stopping = true;
  state.lastStop = { threadId: live.threadId, at: Date.now() };
  setProgress(t.stopping);
  void cancel(live);
}

async function cancel(live: LiveRun): Promise<void> {
  try {
    await cancelRun(live.threadId, live.runId);
  } catch (err) {
    // Not recorded yet (its request is still on the way): RUN_STARTED cancels it.
    if (!live.started && err instanceof HttpError && err.status === 404) return;
    live.stopping = false;
    if (!state.runs.includes(live)) return;
    setProgress(t.running);
    showFailure(describeFailure(err));
  }
}

function touchThread(): void {
  const entry = state.current;
  if (!entry) return;
  entry.updatedAt = Date.now();
  if (!known(entry.id)) {
    state.threads.push(entry);
    state.started.set(entry.id, Date.now());
  }
  store.currentThread.set(entry.id);
  saveThreads();
}

/** A 409 "thread busy" right after this page stopped a run on the thread.

The server lets go of a stopped run once it has written what the run left, which can
be a moment after its stream ended; "stop, then send at once" should just work.
*/
function justStopped(threadId: string, err: unknown, attempt: number): boolean {
  const failure = err as { status?: unknown; payload?: { code?: unknown } };
  return (
    failure?.status === 409 &&
    failure.payload?.code === "thread_busy" &&
    state.lastStop.threadId === threadId &&
    Date.now() - state.lastStop.at < RETRY_BUSY_WINDOW_MS &&
    attempt < RETRY_BUSY_ATTEMPTS
  );
}

/** Send `text`; during a run, only with a `strategy` (else the page asks which one). */
async function send(text: string, strategy?: Strategy): Promise<void> {
  const entry = state.current;
  text = text.trim();
  if (!entry || !text || state.controls.size) return;
  if (state.runs.length && !strategy) {
    offerChoice();
    return;
  }
  hideChoice();
  if (!known(entry.id)) {
    // The title the server gives a thread from its first message (it wins once listed).
    const flat = text.replace(/\s+/g, " ");
    entry.title = flat.length > 40 ? `${flat.slice(0, 40)}…` : flat;
    ui.title.textContent = entry.title;
  }
  touchThread();
  store.lastGraph.set(entry.graphId);
  const message: Message = { id: randomUUID(), role: "user", content: text };
  const bubble = view.addUser(text, message.id);
  bubble.classList.toggle("is-queued", strategy === "enqueue");
  view.scrollToBottom();
  ui.input.value = "";
  autosize();
  await startRun({ message, strategy }, [], strategy ? bubble : null);
}

/** A message typed during a run: wait for the run, or stop it and send now? */
function offerChoice(): void {
  ui.choice.hidden = false;
  ui.choiceWait.focus();
}

function hideChoice(): void {
  if (ui.choice.hidden) return;
  const focused = ui.choice.contains(document.activeElement);
  ui.choice.hidden = true;
  if (focused && !ui.input.disabled) ui.input.focus();
}

/** "Stop and send": the server cancels the run under way and starts this one at once. */
function sendInstead(): void {
  const current = state.runs[0];
  if (current && ui.input.value.trim()) current.quiet = true;
  void send(ui.input.value, "interrupt");
}

function track(agent: HttpAgent, threadId: string, runId: string, bubble: HTMLElement | null): LiveRun {
  const live: LiveRun = {
    agent,
    threadId,
    runId,
    started: false,
    stopping: false,
    cancelled: false,
    quiet: false,
    bubble,
    reread: false,
    failed: false,
    interrupts: [],
  };
  state.runs.push(live);
  syncRunning();
  if (state.runs.length === 1) setProgress(t.connecting);
  return live;
}

async function startRun(
  input: RunInput,
  batch: InterruptControl[] = [],
  bubble: HTMLElement | null = null,
): Promise<void> {
  const entry = state.current;
  if (!entry) return;
  // The server keeps the history: a run carries only what is new (the message, or the
  // answers), which also keeps long threads under the request size limit.
  const agent = new HttpAgent({
    url: agentUrl(entry.graphId),
    headers: authHeaders(),
    threadId: entry.id,
    initialMessages: input.message ? [input.message] : [],
  });
  const live = track(agent, entry.id, randomUUID(), bubble);
  const params: RunAgentParameters = { runId: live.runId };
  if (input.resume) params.resume = input.resume;
  if (input.strategy) params.forwardedProps = { multitaskStrategy: input.strategy };
  await follow(live, params, input, batch);
}

/** Follow a run the server has under way (found after a reload), from its first event. */
async function joinRun(record: RunRecord): Promise<void> {
  const live = track(new RunStream(record.threadId, record.runId), record.threadId, record.runId, null);
  live.reread = record.status === "queued";
  await follow(live, { runId: record.runId }, {}, []);
}

async function follow(
  live: LiveRun,
  params: RunAgentParameters,
  input: RunInput,
  batch: InterruptControl[],
): Promise<void> {
  const mine = () => state.runs.includes(live);
  try {
    for (let attempt = 1; ; attempt++) {
      try {
        await live.agent.runAgent(params, subscriber(live, batch));
        break;
      } catch (err) {
        if (!(mine() && !live.started && !live.stopping && justStopped(live.threadId, err, attempt))) {
          throw err;
        }
        await new Promise((resolve) => window.setTimeout(resolve, RETRY_BUSY_MS));
      }
    }
  } catch (err) {
    if (mine()) failed(describeFailure(err), live.started, input, batch);
  } finally {
    if (mine()) finish(live);
  }
}

function began(live: LiveRun, runId: string, batch: InterruptControl[]): void {
  live.started = true;
  live.runId = runId || live.runId;
  if (live.bubble) {
    live.bubble.classList.remove("is-queued");
    view.addNode(live.bubble);
  }
  setProgress(live.stopping ? t.stopping : t.thinking);
  setStatus(live.threadId, "running");
  for (const control of batch) {
    const answer = state.answers.get(control.id);
    control.markAnswered(answer?.summary ?? "", answer?.cancelled ?? false);
  }
  if (batch.length) resetInterrupts();
  if (live.stopping) void cancel(live); // stopped before the server had recorded it
  refreshComposer();
}

function subscriber(live: LiveRun, batch: InterruptControl[]): AgentSubscriber {
  const mine = () => state.runs.includes(live);
  return {
    onRunStartedEvent({ event }) {
      if (mine()) began(live, event.runId, batch);
    },
    onStepStartedEvent({ event }) {
      if (mine() && !live.stopping) setProgress(STEP_TEXT[event.stepName] ?? t.runningStep(event.stepName));
    },
    onReasoningMessageStartEvent({ event }) {
      if (!mine()) return;
      // Replayed after a reload, like the text: rebuilt in its place, not repeated.
      view.reasoning(event.messageId).restart();
      if (!live.stopping) setProgress(t.thinking);
    },
    onReasoningMessageContentEvent({ event }) {
      if (mine()) view.reasoning(event.messageId).append(event.delta);
    },
    onReasoningMessageEndEvent({ event }) {
      if (mine()) view.reasoning(event.messageId).finish();
    },
    onTextMessageStartEvent({ event }) {
      if (!mine()) return;
      // A joined run replays from its start: text the history showed is rebuilt, not repeated.
      view.assistant(event.messageId).set("");
      if (!live.stopping) setProgress(t.answering);
    },
    onTextMessageContentEvent({ event }) {
      if (mine()) view.assistant(event.messageId).append(event.delta);
    },
    onTextMessageEndEvent({ event }) {
      if (mine()) view.assistant(event.messageId).finish();
    },
    onToolCallStartEvent({ event }) {
      if (!mine()) return;
      view.tool(event.toolCallId, event.toolCallName).setArgs("");
      if (!live.stopping) setProgress(t.preparingCall(event.toolCallName));
    },
    onToolCallArgsEvent({ event }) {
      if (mine()) view.tool(event.toolCallId).appendArgs(event.delta);
    },
    onToolCallEndEvent({ event, toolCallName }) {
      if (!mine()) return;
      view.tool(event.toolCallId).setState("running");
      if (!live.stopping) setProgress(t.runningStep(toolCallName));
    },
    onToolCallResultEvent({ event }) {
      if (!mine()) return;
      const card = view.tool(event.toolCallId);
      card.setResult(textOf(event.content), outcomeOf(event.metadata), toolDataOf(event.metadata));
    },
    onRunFinishedEvent(params) {
      if (mine() && params.outcome === "interrupt") live.interrupts = params.interrupts;
    },
    onRunErrorEvent({ event }) {
      // "abort": HttpAgent's own, for a stream this page stopped reading.
      if (!mine() || event.code === "abort") return;
      if (event.code === "cancelled") {
        live.cancelled = true;
        return;
      }
      live.failed = true;
      view.settleTools("stopped");
      const entry = state.current;
      showFailure(
        describeRunError(event.code, event.message),
        entry ? { label: t.reloadThread, run: () => void openThread(entry) } : undefined,
      );
    },
  };
}

function finish(live: LiveRun): void {
  state.runs = state.runs.filter((other) => other !== live);
  if (!state.runs.some((other) => other.threadId === live.threadId) && live.started) {
    setStatus(
      live.threadId,
      live.interrupts.length ? "waiting" : live.cancelled ? "stopped" : live.failed ? "failed" : null,
    );
    void refreshThreads();
  }
  const entry = state.current;
  if (live.reread && !state.runs.length && entry?.id === live.threadId) {
    void openThread(entry);
    return;
  }
  for (const card of document.querySelectorAll(".msg-assistant.streaming")) {
    card.classList.remove("streaming");
  }
  view.settleReasoning();
  if (live.cancelled) {
    view.settleTools("stopped");
    if (!live.quiet) view.notice("info", t.stopped);
  }
  syncRunning();
  if (state.runs.length && !state.runs.some((other) => other.started)) setProgress(t.queued);
  if (live.interrupts.length) showInterrupts(live.interrupts);
  if (live.started) touchThread();
  if (!state.runs.length && !state.controls.size) focusComposer();
}

function failed(failure: Failure, started: boolean, input: RunInput, batch: InterruptControl[]): void {
  if (!started && batch.length) {
    // A refused answer: the interrupt is still pending, so the control stays.
    state.answers.clear();
    // 409: the thread moved on without this page (answered elsewhere, or busy); the
    // server's view of it is one click away.
    const entry = state.current;
    const reload =
      failure.kind === "conflict" && entry
        ? { label: t.reloadThread, run: () => void openThread(entry) }
        : undefined;
    for (const control of batch) {
      control.setBusy(false);
      control.showError(failure.text, reload);
    }
    if (failure.kind === "auth") openSettings();
    return;
  }
  view.settleTools("stopped");
  if (!started && input.message) {
    const bubble = ui.messages.querySelector(`[data-message-id="${CSS.escape(input.message.id)}"]`);
    bubble?.classList.remove("is-queued");
    bubble?.classList.add("is-unsent");
    if (!ui.input.value) {
      ui.input.value = textOf(input.message.content);
      autosize();
    }
  }
  const entry = state.current;
  const reload = entry ? { label: t.reloadThread, run: () => void openThread(entry) } : undefined;
  showFailure(failure, failure.kind === "auth" ? undefined : reload);
}

function showFailure(failure: Failure, action?: { label: string; run: () => void }): void {
  if (failure.kind === "auth") {
    view.notice("error", failure.text, { label: t.openSettings, run: openSettings });
    openSettings();
    return;
  }
  view.notice("error", failure.text, action);
}

// --- composer, settings, layout ----------------------------------------------------

function autosize(): void {
  ui.input.style.height = "auto";
  ui.input.style.height = `${Math.min(ui.input.scrollHeight, 200)}px`;
  refreshComposer();
}

function focusComposer(): void {
  // On touch screens focusing would pop the keyboard over the answer.
  if (window.matchMedia("(pointer: fine)").matches && !ui.input.disabled) ui.input.focus();
}

function openSettings(): void {
  if (ui.app.clientWidth < 860) openSidebar();
  ui.settings.open = true;
  ui.apiKey.focus();
}

function openSidebar(): void {
  ui.app.classList.add("sidebar-open");
  ui.scrim.hidden = false;
  ui.openSidebar.setAttribute("aria-expanded", "true");
}

function closeSidebar(): void {
  ui.app.classList.remove("sidebar-open");
  ui.scrim.hidden = true;
  ui.openSidebar.setAttribute("aria-expanded", "false");
}

async function loadGraphs(): Promise<boolean> {
  try {
    state.graphs = await listGraphs();
  } catch (err) {
    view.clear();
    showFailure(describeFailure(err), { label: t.retry, run: () => void start() });
    return false;
  }
  if (!state.graphs.length) {
    view.clear();
    view.notice("error", t.noAgents);
    return false;
  }
  return true;
}

async function start(): Promise<void> {
  if (!(await loadGraphs())) return;
  const listed = refreshThreads();
  const id = store.currentThread.get();
  const entry = id ? known(id) : undefined;
  if (entry) await openThread(entry);
  else newDraft();
  await listed;
}

/** Keep the sidebar current: other tabs, the CLI and scripts make and run threads too. */
function pollThreads(): void {
  window.setInterval(() => {
    if (!document.hidden) void refreshThreads();
  }, THREADS_POLL_MS);
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden) void refreshThreads();
  });
}

function wire(): void {
  ui.composer.addEventListener("submit", (event) => {
    event.preventDefault();
    void send(ui.input.value);
  });
  ui.input.addEventListener("keydown", (event) => {
    // Enter sends; Shift+Enter is a newline; Enter that confirms an IME candidate is neither.
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing && event.keyCode !== 229) {
      event.preventDefault();
      if (!ui.send.disabled) ui.composer.requestSubmit();
    }
  });
  ui.input.addEventListener("input", autosize);
  narrow.addEventListener("change", refreshComposer);
  ui.stop.addEventListener("click", stopRun);
  ui.choiceWait.addEventListener("click", () => void send(ui.input.value, "enqueue"));
  ui.choiceInterrupt.addEventListener("click", sendInstead);
  ui.choiceCancel.addEventListener("click", hideChoice);
  ui.choice.addEventListener("keydown", (event) => {
    if (event.key === "Escape") hideChoice();
  });
  ui.newThread.addEventListener("click", () => {
    closeSidebar();
    newDraft(state.current?.graphId);
  });
  ui.agentSelect.addEventListener("change", () => {
    const graphId = ui.agentSelect.value;
    store.lastGraph.set(graphId);
    const entry = state.current;
    if (entry && !known(entry.id) && !state.runs.length) {
      entry.graphId = graphId;
      view.showWelcome(graphInfo(graphId), (text) => void send(text));
      setCurrent(entry);
    } else {
      newDraft(graphId);
    }
  });
  ui.openSidebar.addEventListener("click", openSidebar);
  ui.closeSidebar.addEventListener("click", closeSidebar);
  ui.scrim.addEventListener("click", closeSidebar);
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && ui.app.classList.contains("sidebar-open")) closeSidebar();
  });
  ui.apiKey.value = store.apiKey.get();
  ui.settingsForm.addEventListener("submit", (event) => {
    event.preventDefault();
    store.apiKey.set(ui.apiKey.value);
    ui.settingsSaved.textContent = t.saved;
    window.setTimeout(() => (ui.settingsSaved.textContent = ""), 2000);
    closeSidebar();
    void start();
  });
  refreshComposer();
}

wire();
saveThreads();
pollThreads();
void start();
