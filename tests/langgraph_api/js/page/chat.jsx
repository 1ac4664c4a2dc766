// What both test pages share: the server named by the query string
// (?apiUrl=...&apiKey=...&assistantId=...), the messages, the question an interrupt asks
// and the message form. Each page wires them to its own hook.
import { useState } from "react";

export const params = new URLSearchParams(window.location.search);
export const server = {
  apiUrl: params.get("apiUrl"),
  apiKey: params.get("apiKey") ?? undefined,
  assistantId: params.get("assistantId") ?? "weather",
};

function text(content) {
  if (typeof content === "string") return content;
  return (content ?? [])
    .filter((part) => part.type === "text")
    .map((part) => part.text)
    .join("");
}

export function Messages({ messages }) {
  return (
    <ol aria-label="messages">
      {messages.map((message, i) => (
        <li key={message.id ?? i} data-type={message.type ?? message.getType?.()}>
          {text(message.content)}
        </li>
      ))}
    </ol>
  );
}

export function Question({ interrupt, onAnswer }) {
  const [answer, setAnswer] = useState("");
  const asked = interrupt.value ?? {};
  return (
    <Form label="question" onSubmit={() => onAnswer(answer)}>
      <p data-testid="question">{asked.message}</p>
      <input
        aria-label="answer"
        placeholder={asked.placeholder ?? ""}
        value={answer}
        onChange={(event) => setAnswer(event.target.value)}
      />
      <button type="submit">Answer</button>
    </Form>
  );
}

export function Failure({ error }) {
  return error ? <p role="alert">{String(error?.message ?? error)}</p> : null;
}

export function Ask({ busy, onAsk }) {
  const [draft, setDraft] = useState("");
  return (
    <Form
      label="ask"
      onSubmit={() => {
        onAsk(draft);
        setDraft("");
      }}
    >
      <input aria-label="message" value={draft} onChange={(e) => setDraft(e.target.value)} />
      <button type="submit" disabled={busy}>
        Send
      </button>
    </Form>
  );
}

// A form that stays on the page when sent.
function Form({ label, onSubmit, children }) {
  return (
    <form
      aria-label={label}
      onSubmit={(event) => {
        event.preventDefault();
        onSubmit();
      }}
    >
      {children}
    </form>
  );
}
