// A thread's messages as the server keeps them (GET /api/threads/{id}), drawn the way the
// live run drew them: user bubbles, folded reasoning, answers, tool cards with their
// results, and the questions already answered.

import type { Message } from "@ag-ui/client";
import { questionOf, textOf } from "./format";
import { toolDataOf } from "./tooldata";
import { t } from "./i18n";
import { isAskTool, outcomeOf, type ConversationView } from "./view";

/** A reply cut short by a stop: the server marks it `metadata.stopped` (docs/api.md). */
function wasStopped(message: Message): boolean {
  const metadata = (message as { metadata?: unknown }).metadata;
  return (metadata as { stopped?: unknown } | null | undefined)?.stopped === true;
}

/** `settle`: no run will bring these calls' results, so one without a result was left
 * unfinished (an older page: always; the newest: when no run is under way). */
export function renderHistory(view: ConversationView, messages: Message[], settle = true): void {
  const calls = new Set<string>();
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
        calls.add(call.id);
      }
      // The notice the live run ended with, so a reopened thread reads as it did then.
      if (wasStopped(message)) view.notice("info", t.stopped);
    } else if (message.role === "tool") {
      const card = view.tool(message.toolCallId);
      const result = textOf(message.content);
      const outcome = outcomeOf(message.metadata, message.error);
      card.setResult(result, outcome, toolDataOf(message.metadata));
      if (isAskTool(card.name)) view.answeredQuestion(questionOf(card.argsText), result, outcome);
    }
  }
  if (settle) view.settleTools("stopped", calls);
}
