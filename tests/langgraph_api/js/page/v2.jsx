// A chat page built on @langchain/react's `useStream`, which speaks LangGraph's
// thread-scoped streaming protocol (`POST /threads/{id}/commands` and
// `POST /threads/{id}/stream/events`). The query string names the server (chat.jsx);
// `threadId=...` opens that thread (a reload).
import { useState } from "react";
import { createRoot } from "react-dom/client";
import { useStream } from "@langchain/react";
import { Ask, Failure, Messages, Question, params, server } from "./chat.jsx";

function Chat() {
  const [threadId, setThreadId] = useState(params.get("threadId"));
  const stream = useStream({ ...server, threadId, onThreadId: setThreadId });

  return (
    <main data-thread-id={threadId ?? ""} data-loading={String(stream.isLoading)}>
      <Messages messages={stream.messages} />
      {stream.interrupt ? (
        <Question interrupt={stream.interrupt} onAnswer={(answer) => stream.respond(answer)} />
      ) : null}
      <Failure error={stream.error} />
      <Ask
        busy={stream.isLoading}
        onAsk={(draft) => stream.submit({ messages: [{ type: "human", content: draft }] })}
      />
    </main>
  );
}

createRoot(document.getElementById("root")).render(<Chat />);
