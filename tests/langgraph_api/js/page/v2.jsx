// A chat page built on @langchain/react's `useStream`, which speaks LangGraph's
// thread-scoped streaming protocol (`POST /threads/{id}/commands` and
// `POST /threads/{id}/stream/events`). The query string names the server:
// ?apiUrl=...&apiKey=...&assistantId=...; `threadId=...` opens that thread (a reload).
import { useState } from "react";
import { createRoot } from "react-dom/client";
import { useStream } from "@langchain/react";

const params = new URLSearchParams(window.location.search);
const apiUrl = params.get("apiUrl");
const apiKey = params.get("apiKey") ?? undefined;
const assistantId = params.get("assistantId") ?? "weather";

function text(content) {
  if (typeof content === "string") return content;
  return (content ?? [])
    .filter((part) => part.type === "text")
    .map((part) => part.text)
    .join("");
}

function Question({ interrupt, onAnswer }) {
  const [answer, setAnswer] = useState("");
  const asked = interrupt.value ?? {};
  return (
    <form
      aria-label="question"
      onSubmit={(event) => {
        event.preventDefault();
        onAnswer(answer);
      }}
    >
      <p data-testid="question">{asked.message}</p>
      <input aria-label="answer" value={answer} onChange={(event) => setAnswer(event.target.value)} />
      <button type="submit">Answer</button>
    </form>
  );
}

function Chat() {
  const [threadId, setThreadId] = useState(params.get("threadId"));
  const [draft, setDraft] = useState("");
  const stream = useStream({ apiUrl, apiKey, assistantId, threadId, onThreadId: setThreadId });

  return (
    <main data-thread-id={threadId ?? ""} data-loading={String(stream.isLoading)}>
      <ol aria-label="messages">
        {stream.messages.map((message, i) => (
          <li key={message.id ?? i} data-type={message.type ?? message.getType?.()}>
            {text(message.content)}
          </li>
        ))}
      </ol>
      {stream.interrupt ? (
        <Question interrupt={stream.interrupt} onAnswer={(answer) => stream.respond(answer)} />
      ) : null}
      {stream.error ? <p role="alert">{String(stream.error?.message ?? stream.error)}</p> : null}
      <form
        aria-label="ask"
        onSubmit={(event) => {
          event.preventDefault();
          stream.submit({ messages: [{ type: "human", content: draft }] });
          setDraft("");
        }}
      >
        <input aria-label="message" value={draft} onChange={(e) => setDraft(e.target.value)} />
        <button type="submit" disabled={stream.isLoading}>
          Send
        </button>
      </form>
    </main>
  );
}

createRoot(document.getElementById("root")).render(<Chat />);
