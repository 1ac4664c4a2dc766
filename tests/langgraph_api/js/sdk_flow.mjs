// The weather agent's question and answer through @langchain/langgraph-sdk, as a Node
// program would drive a LangGraph server: `node sdk_flow.mjs <server url> <api key>`.
// It prints one JSON document of what the SDK handed back at each step; the test that
// runs it (tests/langgraph_api/test_js_clients.py) scripts the model and judges it.
import { Client } from "@langchain/langgraph-sdk";

const [url, apiKey] = process.argv.slice(2);
if (!url || !apiKey) {
  console.error("usage: node sdk_flow.mjs <server url> <api key>");
  process.exit(2);
}

// `apiKey` is how the SDK signs in (it sends x-api-key), as agent-chat-ui passes it.
const client = new Client({ apiUrl: url, apiKey });
const MODES = ["values", "messages-tuple", "updates"];

async function collect(parts) {
  const seen = [];
  for await (const { event, data, id } of parts) seen.push({ event, data, id: id ?? null });
  return seen;
}

const thread = await client.threads.create();
const threadId = thread.thread_id;

const created = [];
const asked = await collect(
  client.runs.stream(threadId, "weather", {
    input: { messages: [{ role: "user", content: "查天气" }] },
    streamMode: MODES,
    onRunCreated: (run) => created.push(run),
  }),
);
const waiting = await client.threads.get(threadId);

const answered = await collect(
  client.runs.stream(threadId, "weather", {
    command: { resume: "上海" },
    streamMode: MODES,
  }),
);
const state = await client.threads.getState(threadId);
const history = await client.threads.getHistory(threadId, { limit: 100 });
const idle = await client.threads.get(threadId);

const background = await client.runs.create(threadId, "weather", {
  input: { messages: [{ role: "user", content: "谢谢" }] },
});
const joined = await client.runs.join(threadId, background.run_id);
const finished = await client.runs.get(threadId, background.run_id);

console.log(
  JSON.stringify({
    threadId,
    created,
    asked,
    waiting: { status: waiting.status, interrupts: waiting.interrupts },
    answered,
    state: {
      messages: state.values.messages.map((m) => ({ type: m.type, content: m.content })),
      next: state.next,
      interrupts: state.interrupts,
      checkpointId: state.checkpoint.checkpoint_id,
    },
    history: history.map((s) => ({
      step: s.metadata.step,
      next: s.next,
      checkpointId: s.checkpoint.checkpoint_id,
      parentId: s.parent_checkpoint?.checkpoint_id ?? null,
    })),
    idle: idle.status,
    background: { runId: background.run_id, status: background.status },
    joined: joined.messages.map((m) => ({ type: m.type, content: m.content })),
    finished: finished.status,
  }),
);
