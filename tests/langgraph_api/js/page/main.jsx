// A chat page built on LangGraph's React hook, the run-scoped `useStream` of
// @langchain/langgraph-sdk/react, wired the way agent-chat-ui wires it (apiUrl, apiKey,
// assistantId, a thread id kept by the page, the thread's history fetched). The query
// string names the server (chat.jsx); `history=0` leaves the history unfetched, so the
// hook knows of a question from the stream alone.
import { useState } from "react";
import { createRoot } from "react-dom/client";
import { useStream } from "@langchain/langgraph-sdk/react";
import { Ask, Failure, Messages, Question, params, server } from "./chat.jsx";

function Chat() {
  const [threadId, setThreadId] = useState(null);
  const [runId, setRunId] = useState(null);
  const stream = useStream({
    ...server,
    threadId,
    onThreadId: setThreadId,
    onCreated: (run) => setRunId(run.run_id),
    fetchStateHistory: params.get("history") !== "0",
  });

  return (
    <main data-thread-id={threadId ?? ""} data-run-id={runId ?? ""} data-loading={String(stream.isLoading)}>
      <Messages messages={stream.messages} />
      {stream.interrupt ? (
        <Question
          interrupt={stream.interrupt}
          onAnswer={(answer) => stream.submit(null, { command: { resume: answer } })}
        />
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
