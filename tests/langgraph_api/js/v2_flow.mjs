// The weather agent's question and answer through @langchain/langgraph-sdk's client of
// LangGraph's thread-scoped streaming protocol (`client.threads.stream`, commands and
// SSE event streams): `node v2_flow.mjs <server url> <api key> <assistant> <question>
// <answer>`. It prints one JSON document of what the client handed back; the test that
// runs it (tests/langgraph_api/test_thread_stream_js.py) scripts the model and judges it.
import { Client } from "@langchain/langgraph-sdk";

const [url, apiKey, assistantId, question, answer] = process.argv.slice(2);
if (!answer) {
  console.error("usage: node v2_flow.mjs <server url> <api key> <assistant> <question> <answer>");
  process.exit(2);
}

const client = new Client({ apiUrl: url, apiKey, streamProtocol: "v2" });
const thread = client.threads.stream({ assistantId });
const started = await thread.run.start({
  input: { messages: [{ role: "user", content: question }] },
});
const subscription = await thread.subscribe({
  channels: ["lifecycle", "input", "messages", "values", "tools"],
});
const events = subscription[Symbol.asyncIterator]();
const seen = [];

// The next events up to the first `done` accepts (the client's own buffering decides
// how they arrive; the server's stream stays open across runs).
async function until(done) {
  for (;;) {
    const { value, done: ended } = await events.next();
    if (ended) throw new Error(`the event stream ended early after ${JSON.stringify(seen.at(-1))}`);
    seen.push({ method: value.method, seq: value.seq, data: value.params.data });
    if (done(value)) return value;
  }
}
const lifecycle = (name) => (event) => event.method === "lifecycle" && event.params.data.event === name;

const asked = await until((event) => event.method === "input.requested");
await until(lifecycle("interrupted"));
const pausedAt = seen.length;
await thread.input.respond({
  namespace: [],
  interrupt_id: asked.params.data.interrupt_id,
  response: answer,
});
await until(lifecycle("completed"));
const state = await thread.state.get({ namespace: [] });
await thread.close();

console.log(
  JSON.stringify({
    threadId: thread.threadId,
    runId: started.run_id,
    paused: seen.slice(0, pausedAt),
    resumed: seen.slice(pausedAt),
    state,
  }),
);
