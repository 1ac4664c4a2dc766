// The page controller: which thread is open and what happens on it. It owns the pieces
// (threads.ts: the thread list; runs.ts: the runs followed; questions.ts: the questions
// pending; composer.ts: the message box; layout.ts: the sidebar; signin.ts: who is signed
// in) and decides what one
// piece's news means for the others. Threads are restored from GET /api/threads/{id}
// (the latest page; older.ts brings the earlier ones as the reader scrolls up); a run
// still under way there is followed again from its recorded events.

import { randomUUID, type Interrupt, type Message, type ResumeEntry } from "@ag-ui/client";
import {
  deleteThread,
  describeFailure,
  getThread,
  isActive,
  listGraphs,
  listRuns,
  listThreads,
  renameThread,
  type Failure,
  type GraphInfo,
  type ThreadPage,
} from "./api";
import { Composer, type Strategy } from "./composer";
import { byId, h } from "./dom";
import { draftTitle, textOf } from "./format";
import { renderHistory } from "./history";
import { t } from "./i18n";
import { InterruptControl, type InterruptHandlers } from "./interrupts";
import { Layout } from "./layout";
import { OlderHistory } from "./older";
import { Questions, type Answer } from "./questions";
import { endStatus, interruptsOf, started } from "./runfold";
import { Runs, type LiveRun, type RunHost } from "./runs";
import { renderGraphs, ThreadList } from "./sidebar";
import type { Session } from "./signin";
import * as store from "./store";
import type { ThreadEntry, ThreadStatus } from "./store";
import { Threads } from "./threads";
import { ConversationView } from "./view";

// How often the sidebar reads the server's thread list while the page is visible.
const THREADS_POLL_MS = 4000;
const THREADS_LIMIT = 50;
// How long a deleted thread can be brought back: its DELETE is sent only after this.
export const UNDO_DELETE_MS = 5000;

const THREAD_PARAM = "thread";

/** The thread a link or a reload names (`?thread=<id>`), if any. */
function threadInUrl(): string | null {
  return new URL(window.location.href).searchParams.get(THREAD_PARAM) || null;
}

/** The open thread in the address bar, so a reload or a copied link opens it again; a
 * draft (not on the server yet) has none. replaceState: opening threads is not navigation
 * the back button should step through. */
function showInUrl(id: string | null): void {
  const url = new URL(window.location.href);
  if (url.searchParams.get(THREAD_PARAM) === id) return;
  if (id) url.searchParams.set(THREAD_PARAM, id);
  else url.searchParams.delete(THREAD_PARAM);
  window.history.replaceState(window.history.state, "", url);
}

/** A delete waiting for its undo to run out. */
interface PendingDelete {
  entry: ThreadEntry;
  timer: number;
  toast: HTMLElement;
  // The draft the delete opened in the deleted thread's place: an undo while it is still
  // open goes back to the thread.
  draft: string | null;
}

interface Action {
  label: string;
  run: () => void;
}

export class Page implements RunHost {
  private readonly title = byId<HTMLHeadingElement>("thread-title");
  private readonly agentSelect = byId<HTMLSelectElement>("agent-select");
  private readonly agentPicker = byId<HTMLDivElement>("agent-picker");
  private readonly messages = byId<HTMLDivElement>("messages");
  private readonly conversation = byId<HTMLElement>("conversation");
  private readonly view = new ConversationView(this.messages, this.conversation);
  private readonly older = new OlderHistory(this.view, this.conversation);
  private readonly threads = new Threads(store.loadThreads());
  // Whose cached list `threads` started from (null: nobody's, or unknown).
  private listOwner = store.threadsOwner();
  private readonly questions = new Questions<InterruptControl>();
  private readonly layout = new Layout();
  private readonly composer: Composer;
  private readonly runs: Runs;
  private readonly threadList: ThreadList;
  private graphs: GraphInfo[] = [];
  // Bumped by every thread opened: a slower answer for an earlier one is dropped.
  private loading = 0;
  private listing = false;
  private pendingDelete: PendingDelete | null = null;
  // The page is being left for another person's: it writes nothing more to the browser.
  private leaving = false;
  private readonly interruptHandlers: InterruptHandlers = {
    answer: (control, value, summary) => {
      this.collect(control, { interruptId: control.id, status: "resolved", payload: { value } }, summary);
    },
    cancel: (control) => {
      this.collect(control, { interruptId: control.id, status: "cancelled" }, t.cancelled, true);
    },
  };

  constructor(private readonly session: Session) {
    this.composer = new Composer(() => ({ waiting: this.questions.pending, open: this.threads.current !== null }), {
      send: (text, strategy) => void this.send(text, strategy),
      sendInstead: (text) => this.sendInstead(text),
      stop: () => this.runs.stop(),
    });
    this.runs = new Runs(this.view, this.composer, this);
    this.threadList = new ThreadList(byId<HTMLUListElement>("thread-list"), byId<HTMLParagraphElement>("thread-empty"), {
      open: (entry) => {
        this.layout.closeSidebar();
        if (entry.id !== this.threads.current?.id) void this.openThread(entry);
      },
      remove: (entry) => void this.removeThread(entry),
      rename: (entry, title) => this.rename(entry, title),
    });
    byId("new-thread").addEventListener("click", () => {
      this.layout.closeSidebar();
      this.newDraft(this.threads.current?.graphId);
    });
    this.agentSelect.addEventListener("change", () => this.pickAgent(this.agentSelect.value));
    const search = byId<HTMLInputElement>("thread-search");
    search.addEventListener("input", () => this.threadList.filter(search.value));
    this.agentPicker.hidden = true;
    this.composer.refresh();
    this.saveThreads();
    // A tab closed during the undo still deletes what the user deleted.
    window.addEventListener("pagehide", () => this.flushDelete());
    // Signing out: a delete waiting for its undo goes now, while the key is still here.
    session.onLeave(() => {
      this.flushDelete();
      this.leaving = true;
    });
  }

  private flushDelete(): void {
    const pending = this.takeDelete();
    if (pending) void deleteThread(pending.entry.id, true).catch(() => undefined);
  }

  /** Load the agents, then open the thread the page had open (or a new one). */
  async start(): Promise<void> {
    // Who is signed in (the sign-in screen until someone is); a server that cannot say
    // fails the requests below too, and they show why.
    const me = await this.session.ensure();
    if (me && me.userId !== this.listOwner) {
      // The list this page started from was someone else's (signin.ts dropped the cache).
      this.threads.entries = store.loadThreads();
      this.listOwner = me.userId;
      this.saveThreads();
    }
    if (!(await this.loadGraphs())) return;
    const listed = this.refreshThreads();
    const linked = threadInUrl();
    const id = linked ?? store.currentThread.get();
    let entry = id ? this.threads.known(id) : undefined;
    if (!entry && linked) {
      // A link from elsewhere: the server's list, or the thread itself, says what it is.
      await listed;
      entry = this.threads.known(linked) ?? (await this.linkedThread(linked));
    }
    if (entry) await this.openThread(entry);
    else this.newDraft();
    await listed;
  }

  /** The entry of a thread the server has but does not list here (beyond the first
   * page of the list); undefined when it has no such thread. */
  private async linkedThread(id: string): Promise<ThreadEntry | undefined> {
    let thread: ThreadPage | null;
    try {
      thread = await getThread(id);
    } catch {
      return undefined;
    }
    if (!thread) return undefined;
    const entry = { id, graphId: thread.graphId ?? this.defaultGraph(), title: "", updatedAt: Date.now() };
    this.threads.entries.push(entry);
    return entry;
  }

  /** Keep the sidebar current: other tabs, the CLI and scripts make and run threads too. */
  pollThreads(): void {
    window.setInterval(() => {
      if (!document.hidden) void this.refreshThreads();
    }, THREADS_POLL_MS);
    document.addEventListener("visibilitychange", () => {
      if (!document.hidden) void this.refreshThreads();
    });
  }

  // --- threads ---------------------------------------------------------------------

  private saveThreads(): void {
    if (this.leaving) return;
    store.saveThreads(this.threads.entries);
    this.threadList.render(this.threads.entries, this.threads.current?.id ?? null);
  }

  private setStatus(threadId: string, status: ThreadStatus): void {
    if (this.threads.setStatus(threadId, status, Date.now())) this.saveThreads();
  }

  /** Read the server's thread list (every agent's) into the sidebar. */
  private async refreshThreads(): Promise<void> {
    if (this.listing || !this.graphs.length) return;
    this.listing = true;
    const asked = Date.now();
    try {
      this.threads.merge(await listThreads(null, THREADS_LIMIT), asked, Date.now());
    } catch (err) {
      // The key was revoked: sign in again. An older server, a lost connection: the list
      // the page has stays.
      if (describeFailure(err).kind === "auth") this.signInAgain();
      return;
    } finally {
      this.listing = false;
    }
    const current = this.threads.current;
    if (current && this.threads.known(current.id) && current.title !== this.title.textContent) {
      this.title.textContent = current.title || t.newThread;
    }
    this.saveThreads();
  }

  private async rename(entry: ThreadEntry, title: string): Promise<boolean> {
    try {
      const summary = await renameThread(entry.id, title);
      entry.title = summary?.title || title;
    } catch (err) {
      this.showFailure(describeFailure(err));
      return false;
    }
    if (this.threads.current?.id === entry.id) {
      this.threads.current.title = entry.title;
      this.title.textContent = entry.title;
    }
    this.saveThreads();
    return true;
  }

  /** Delete with an undo: the thread leaves the list at once, the DELETE goes when the
   * toast runs out, so a mis-tap loses nothing. */
  private removeThread(entry: ThreadEntry): void {
    void this.sendDelete(); // one undo at a time: an earlier delete goes through now
    this.threads.hide(entry.id);
    const wasOpen = entry.id === this.threads.current?.id;
    if (wasOpen) this.newDraft(entry.graphId);
    else this.saveThreads();
    const toast = h(
      "div",
      { class: "toast", attrs: { role: "status" } },
      h("span", { class: "toast-text", text: t.deletedThread(entry.title || t.newThread) }),
      h("button", {
        class: "btn btn-small toast-undo",
        text: t.undo,
        attrs: { type: "button" },
        on: { click: () => this.undoDelete() },
      }),
    );
    document.body.append(toast);
    this.pendingDelete = {
      entry,
      toast,
      timer: window.setTimeout(() => void this.sendDelete(), UNDO_DELETE_MS),
      draft: wasOpen ? (this.threads.current?.id ?? null) : null,
    };
  }

  /** The pending delete, its toast gone and its timer stopped; null when there is none. */
  private takeDelete(): PendingDelete | null {
    const pending = this.pendingDelete;
    if (!pending) return null;
    this.pendingDelete = null;
    window.clearTimeout(pending.timer);
    pending.toast.remove();
    return pending;
  }

  private async sendDelete(): Promise<void> {
    const pending = this.takeDelete();
    if (!pending) return;
    try {
      await deleteThread(pending.entry.id);
    } catch (err) {
      // The server kept it (a run under way, a lost connection): so does the list.
      this.threads.restore(pending.entry.id);
      this.saveThreads();
      this.showFailure(describeFailure(err));
      return;
    }
    this.threads.forget(pending.entry.id);
    this.saveThreads();
  }

  private undoDelete(): void {
    const pending = this.takeDelete();
    if (!pending) return;
    const entry = this.threads.restore(pending.entry.id) ?? pending.entry;
    const current = this.threads.current;
    if (pending.draft && current?.id === pending.draft && !this.threads.known(current.id)) {
      void this.openThread(entry);
    } else {
      this.saveThreads();
    }
  }

  /** The open thread had activity: it moves up the list (a draft joins it). */
  private touchThread(): void {
    const entry = this.threads.touch(Date.now());
    if (!entry) return;
    store.currentThread.set(entry.id);
    showInUrl(entry.id);
    this.saveThreads();
  }

  private defaultGraph(): string {
    const last = store.lastGraph.get();
    if (last && this.graphs.some((g) => g.id === last)) return last;
    return this.graphs[0]?.id ?? "weather";
  }

  private graphInfo(id: string): GraphInfo | undefined {
    return this.graphs.find((g) => g.id === id);
  }

  private async loadGraphs(): Promise<boolean> {
    try {
      this.graphs = await listGraphs();
    } catch (err) {
      this.view.clear();
      this.showFailure(describeFailure(err), { label: t.retry, run: () => void this.start() });
      return false;
    } finally {
      this.agentPicker.hidden = !this.graphs.length;
    }
    if (!this.graphs.length) {
      this.view.clear();
      this.view.notice("error", t.noAgents);
      return false;
    }
    return true;
  }

  private pickAgent(graphId: string): void {
    store.lastGraph.set(graphId);
    const entry = this.threads.current;
    if (entry && !this.threads.known(entry.id) && !this.runs.any) {
      entry.graphId = graphId;
      this.view.showWelcome(this.graphInfo(graphId), (text) => void this.send(text));
      this.setCurrent(entry);
    } else {
      this.newDraft(graphId);
    }
  }

  // --- the open thread -------------------------------------------------------------

  private setCurrent(entry: ThreadEntry): void {
    this.threads.current = entry;
    const id = this.threads.known(entry.id) ? entry.id : null;
    store.currentThread.set(id);
    showInUrl(id);
    this.title.textContent = entry.title || t.newThread;
    if (this.graphs.length) renderGraphs(this.agentSelect, this.graphs, entry.graphId);
    this.saveThreads();
  }

  /** A fresh conversation with `graphId`; it joins the list once its first message is sent. */
  private newDraft(graphId = this.defaultGraph()): void {
    this.runs.detach();
    this.loading += 1;
    this.questions.clear();
    this.setCurrent({ id: randomUUID(), graphId, title: "", updatedAt: Date.now() });
    this.view.clear();
    this.older.show(null, null);
    this.view.showWelcome(this.graphInfo(graphId), (text) => void this.send(text));
    this.composer.refresh();
    this.composer.focus();
  }

  private async openThread(entry: ThreadEntry): Promise<void> {
    this.runs.detach();
    const token = ++this.loading;
    this.questions.clear();
    this.setCurrent(entry);
    this.view.clear();
    this.older.show(null, null);
    this.composer.refresh();
    this.messages.setAttribute("aria-busy", "true");
    try {
      const [thread, runs] = await Promise.all([getThread(entry.id), listRuns(entry.id)]);
      if (token !== this.loading) return;
      const active = runs.filter(isActive).reverse();
      this.showThread(entry, thread, active.length > 0);
      for (const run of active) void this.runs.join(run);
    } catch (err) {
      if (token !== this.loading) return;
      this.view.clear();
      this.showFailure(describeFailure(err), { label: t.retry, run: () => void this.openThread(entry) });
    } finally {
      if (token === this.loading) {
        this.messages.removeAttribute("aria-busy");
        this.composer.refresh();
      }
    }
  }

  /** The thread as the server has it; `busy`: a run is under way and will bring the rest. */
  private showThread(entry: ThreadEntry, thread: ThreadPage | null, busy: boolean): void {
    this.view.clear();
    if (!busy && (!thread || (!thread.messages.length && !thread.interrupts.length))) {
      this.view.showWelcome(this.graphInfo(entry.graphId), (text) => void this.send(text));
      return;
    }
    if (thread?.graphId && thread.graphId !== entry.graphId) {
      entry.graphId = thread.graphId;
      this.setCurrent(entry);
    }
    renderHistory(this.view, thread?.messages ?? [], !busy);
    // A run under way asks its own questions, in its RUN_FINISHED, if it stops for them.
    if (!busy) this.showInterrupts(thread?.interrupts ?? []);
    this.view.scrollToBottom();
    // The latest page is shown; the ones before it come as the reader scrolls up.
    this.older.show(entry.id, thread?.older ?? null);
  }

  /** The reload action of a failure on the open thread (none when no thread is open). */
  private reloadAction(): Action | undefined {
    const entry = this.threads.current;
    return entry ? { label: t.reloadThread, run: () => void this.openThread(entry) } : undefined;
  }

  private showFailure(failure: Failure, action?: Action): void {
    if (failure.kind === "auth") this.signInAgain();
    else this.view.notice("error", failure.text, action);
  }

  /** The server no longer takes this tab's key: the sign-in screen over the page, which
   * keeps everything meanwhile (the message being typed too). The same person carries on
   * where they were; someone else gets a fresh page. */
  private signInAgain(): void {
    const before = this.session.me?.userId;
    void this.session.expired().then((me) => {
      if (before !== undefined && me.userId !== before) {
        // Nothing of the last person's page may stay: the cache is theirs (signin.ts
        // dropped it), and so is everything in memory.
        this.leaving = true;
        window.location.replace(window.location.pathname);
        return;
      }
      if (this.graphs.length) void this.refreshThreads();
      else void this.start();
    });
  }

  // --- questions -------------------------------------------------------------------

  private showInterrupts(interrupts: Interrupt[]): void {
    const controls = interrupts.map((interrupt) => new InterruptControl(interrupt, this.interruptHandlers));
    this.questions.replace(controls);
    for (const control of controls) {
      this.view.findTool(control.interrupt.toolCallId)?.setState("waiting");
      this.view.addNode(control.el);
    }
    this.composer.refresh();
    const first = this.questions.first;
    if (first) {
      if (this.threads.current) this.setStatus(this.threads.current.id, "waiting");
      this.view.scrollToBottom();
      first.focus();
    }
  }

  /** Keep an answer; once every pending question has one, resume with all of them. */
  private collect(control: InterruptControl, entry: ResumeEntry, summary: string, cancelled = false): void {
    control.showError("");
    const answer: Answer = { entry, summary, cancelled };
    const next = this.questions.answer(control.id, answer);
    if ("next" in next) {
      control.setBusy(true, t.recorded(next.left));
      // Keyboard users go on to the next question rather than back to the page's top.
      next.next.focus();
      return;
    }
    for (const c of next.batch) c.setBusy(true, t.submitting);
    const current = this.threads.current;
    if (current) void this.runs.start(current, { resume: next.resume }, next.batch);
  }

  // --- sending ---------------------------------------------------------------------

  /** Send `text`; during a run, only with a `strategy` (else the page asks which one). */
  private async send(text: string, strategy?: Strategy): Promise<void> {
    const entry = this.threads.current;
    text = text.trim();
    if (!entry || !text || this.questions.pending) return;
    if (this.runs.any && !strategy) {
      this.composer.offerChoice();
      return;
    }
    this.composer.hideChoice();
    if (!this.threads.known(entry.id)) {
      // The title the server gives a thread from its first message (it wins once listed).
      entry.title = draftTitle(text);
      this.title.textContent = entry.title;
    }
    this.touchThread();
    store.lastGraph.set(entry.graphId);
    const message: Message = { id: randomUUID(), role: "user", content: text };
    const bubble = this.view.addUser(text, message.id);
    bubble.classList.toggle("is-queued", strategy === "enqueue");
    this.view.scrollToBottom();
    this.composer.clear();
    await this.runs.start(entry, { message, strategy }, [], strategy ? bubble : null);
  }

  /** "Stop and send": the server cancels the run under way and starts this one at once. */
  private sendInstead(text: string): void {
    const current = this.runs.first;
    if (current && text.trim()) current.quiet = true;
    void this.send(text, "interrupt");
  }

  // --- what runs mean for the page (RunHost) ---------------------------------------

  began(live: LiveRun): void {
    this.setStatus(live.threadId, "running");
    for (const control of live.batch) {
      const answer = this.questions.answerOf(control.id);
      control.markAnswered(answer?.summary ?? "", answer?.cancelled ?? false);
    }
    if (live.batch.length) this.questions.clear();
    this.composer.refresh();
  }

  ended(live: LiveRun): void {
    const facts = live.facts;
    if (!this.runs.onThread(live.threadId) && started(facts)) {
      this.setStatus(live.threadId, endStatus(facts));
      void this.refreshThreads();
    }
    const entry = this.threads.current;
    if (live.reread && !this.runs.any && entry?.id === live.threadId) {
      void this.openThread(entry);
      return;
    }
    for (const card of document.querySelectorAll(".msg-assistant.streaming")) {
      card.classList.remove("streaming");
    }
    this.view.settleReasoning();
    if (facts.end?.kind === "cancelled") {
      this.view.settleTools("stopped");
      if (!live.quiet) this.view.notice("info", t.stopped);
    }
    this.composer.setRunning(this.runs.any);
    if (this.runs.any && !this.runs.anyStarted) this.composer.setProgress(t.queued);
    const interrupts = interruptsOf(facts);
    if (interrupts.length) this.showInterrupts(interrupts);
    if (started(facts)) this.touchThread();
    if (!this.runs.any && !this.questions.pending) this.composer.focus();
  }

  failed(live: LiveRun, failure: Failure): void {
    const { batch, input } = live;
    if (!started(live.facts) && batch.length) {
      // A refused answer: the interrupt is still pending, so the control stays.
      this.questions.dropAnswers();
      // 409: the thread moved on without this page (answered elsewhere, or busy); the
      // server's view of it is one click away.
      const reload = failure.kind === "conflict" ? this.reloadAction() : undefined;
      for (const control of batch) {
        control.setBusy(false);
        control.showError(failure.text, reload);
      }
      if (failure.kind === "auth") this.signInAgain();
      return;
    }
    this.view.settleTools("stopped");
    if (!started(live.facts) && input.message) {
      const bubble = this.messages.querySelector(`[data-message-id="${CSS.escape(input.message.id)}"]`);
      bubble?.classList.remove("is-queued");
      bubble?.classList.add("is-unsent");
      this.composer.restore(textOf(input.message.content));
    }
    this.showFailure(failure, failure.kind === "auth" ? undefined : this.reloadAction());
  }

  runFailed(_live: LiveRun, failure: Failure): void {
    this.showFailure(failure, this.reloadAction());
  }

  cancelFailed(failure: Failure): void {
    this.showFailure(failure);
  }
}
