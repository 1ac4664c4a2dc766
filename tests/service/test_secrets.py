"""No secret leaves the process: the secrets matrix of issue 14.

Each configured secret (OPENAI_API_KEY, TUSHARE_TOKEN, AGENT_API_KEY) is echoed by
each upstream that can fail with text of its own: the model endpoint (401, 429, 500
bodies), the Tushare MCP server (a tool error, a JSON-RPC error, a malformed result, a
malformed initialize result when a call opens its session and when the toolset first
connects, a body that is not JSON) and Open-Meteo (an error reason). An echo carries
the secret in four forms at once: whole, cut (ten characters from its inside),
URL-encoded and inside a JSON document. An upstream echoes its own credential from the
Authorization header it received, any other secret as given text.

Every output is then scanned for every 8-character fragment of the secret (as
written, URL-encoded, JSON-escaped once and twice): the SSE bytes, the `/api/chat`
body, the thread views, the server's log, every request body the model received; and,
from CLI processes, their stdout/stderr (`chat --server` and in-process) and `cli.log`
(written by the in-process CLI only: with `--server` the CLI keeps no log). The
in-process CLI meets the malformed initialize result at its first connect.

The secrets hold characters that URL-encoding and JSON escaping change (`" / + =`),
so the four forms differ.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.doubles.llm import ScriptedLLM, Turn, error, reasoning, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.doubles.tushare_mcp import EchoKind, TushareMCP
from tests.service.conftest import OPENAI_SECRET, Api, Backend, run_body, server_env
from tests.support.env import env_for_subprocess
from tests.support.processes import REACT_AGENT, ROOT, ServerProcess

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

# --- the secrets, and what counts as a piece of one ----------------------------------

SECRETS: dict[str, tuple[str, str]] = {
    # id: (variable, value)
    "openai_key": ("OPENAI_API_KEY", 'sk-test-SECRET-9f8e"7d6c/5b4a+Q=x1z'),
    "tushare_token": ("TUSHARE_TOKEN", 'ts-TOKEN-3c2b1a0f"e9d8/c7b6+a5=42kq'),
    "agent_key": ("AGENT_API_KEY", 'agent-KEY-4d1f0c7e"b2a9/8e7d+6c=5mw'),
}
TUSHARE_TOKEN = SECRETS["tushare_token"][1]
AGENT_KEY = SECRETS["agent_key"][1]
FRAGMENT = 8


def _escaped(value: str) -> str:
    return json.dumps(value)[1:-1]


def fragments(secret: str) -> Iterator[str]:
    """Every 8-character window of `secret` as written, URL-encoded and JSON-escaped
    (once and twice): any of them in an output is a leak."""
    for form in (secret, quote(secret, safe=""), _escaped(secret), _escaped(_escaped(secret))):
        for start in range(len(form) - FRAGMENT + 1):
            yield form[start : start + FRAGMENT]


def leaked(output: str, secret: str) -> list[str]:
    """The fragments of `secret` found in `output`."""
    return sorted({piece for piece in fragments(secret) if piece in output})


# --- the forms an upstream echoes a secret in ----------------------------------------

FORMS: dict[str, Callable[[str], str]] = {
    "whole": lambda value: value,
    "cut": lambda value: value[5:15],
    "url_encoded": lambda value: "https://upstream.example/v1/auth?key=" + quote(value, safe=""),
    "in_json": lambda value: json.dumps({"headers": {"authorization": f"Bearer {value}"}}),
}


@dataclass
class Echo:
    """What an upstream says: its template, filled with every form of `secret_ids`.

    The upstream's own credential (`own`) is taken from the Authorization header it
    received, not from the test's constant. Every message made is kept in `said`.
    """

    template: str
    secret_ids: tuple[str, ...]
    own: str | None = None
    said: list[str] = field(default_factory=list)

    def __call__(self, authorization: str = "") -> str:
        pieces: list[str] = []
        for secret_id in self.secret_ids:
            value = SECRETS[secret_id][1]
            if secret_id == self.own and authorization:
                value = authorization.removeprefix("Bearer ")
            pieces.extend(form(value) for form in FORMS.values())
        said = self.template.format(piece=" | ".join(pieces))
        self.said.append(said)
        return said


# --- the upstreams -------------------------------------------------------------------


@dataclass(frozen=True)
class Upstream:
    """One echoing upstream: how it is made to echo, and the graph and turns reaching it."""

    id: str
    graph: str
    template: str
    own: str | None = None  # the secret it holds (echoed from its Authorization header)
    llm_status: int = 0  # the model endpoint fails with this status
    mcp_kind: EchoKind | None = None
    mcp_on: str = "tools/call"
    meteo: bool = False
    # Met while the toolset connects (a server that has not connected yet): the
    # model is not called at all.
    connect: bool = False

    def turns(self, echo: Echo, done: str = "查询失败了。") -> list[Turn]:
        """The model's turns for one run (the tool call's `ts_code` names the upstream)."""
        if self.connect:
            return []
        if self.llm_status:
            return [error(self.llm_status, echo=echo)]
        if self.meteo:
            return [tool_call("get_weather", {"location": "北京"}), text(done)]
        return [tool_call("daily", {"ts_code": self.id}), text(done)]

    def arm(self, echo: Echo, mcp: TushareMCP, meteo: FakeOpenMeteo) -> None:
        """Make the tool upstream echo (the model's own echo travels in its turns)."""
        if self.mcp_kind is not None:
            mcp.echo_auth(self.mcp_kind, echo, on=self.mcp_on, when=self._asked)
        if self.meteo:
            meteo.fail_forecast(400, reason=echo())

    def _asked(self, request: dict[str, Any]) -> bool:
        if self.mcp_on != "tools/call":
            return True  # an initialize names no call: it is the upstream's alone
        arguments = (request.get("params") or {}).get("arguments") or {}
        return bool(arguments.get("ts_code") == self.id)

    def hits(self, echo: Echo, meteo: FakeOpenMeteo) -> int:
        """How often the upstream echoed."""
        return len(meteo.forecast_requests) if self.meteo else len(echo.said)


LLM_SAYS = (
    "Incorrect API key provided: {piece}. You can find your API key at "
    "https://platform.openai.com/account/api-keys."
)
# The secret first and last: a validator that cuts a long value keeps both ends.
MCP_SAYS = "{piece}"
METEO_SAYS = "Invalid API key: {piece}"

UPSTREAMS = [
    Upstream("llm_401", "weather", LLM_SAYS, own="openai_key", llm_status=401),
    Upstream("llm_429", "weather", LLM_SAYS, own="openai_key", llm_status=429),
    Upstream("llm_500", "weather", LLM_SAYS, own="openai_key", llm_status=500),
    Upstream("mcp_tool_error", "tushare", MCP_SAYS, own="tushare_token", mcp_kind="tool_error"),
    Upstream("mcp_rpc_error", "tushare", MCP_SAYS, own="tushare_token", mcp_kind="rpc_error"),
    Upstream(
        "mcp_malformed_result", "tushare", MCP_SAYS, own="tushare_token", mcp_kind="malformed"
    ),
    Upstream(
        "mcp_malformed_initialize",
        "tushare",
        MCP_SAYS,
        own="tushare_token",
        mcp_kind="malformed",
        mcp_on="initialize",
    ),
    Upstream("mcp_not_json_body", "tushare", MCP_SAYS, own="tushare_token", mcp_kind="not_json"),
    Upstream(
        "mcp_connect_malformed",
        "tushare",
        MCP_SAYS,
        own="tushare_token",
        mcp_kind="malformed",
        mcp_on="initialize",
        connect=True,
    ),
    Upstream("meteo_error", "weather", METEO_SAYS, meteo=True),
]
BY_ID = {upstream.id: upstream for upstream in UPSTREAMS}

# A body that is not JSON is never answered: the call waits this long, then times out.
# Every other call must end well within it, on a machine running the suite on all cores.
CALL_TIMEOUT_S = "3"
LOG_WAIT_S = 30.0
POLL_S = 0.02


# --- the server ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def mcp() -> Iterator[TushareMCP]:
    with TushareMCP(token=TUSHARE_TOKEN) as double:
        yield double


def secret_env(mcp: TushareMCP) -> dict[str, str]:
    """Every secret set, the Tushare double, short MCP timeouts, no connect back-off."""
    return {
        **dict(SECRETS.values()),
        "TUSHARE_MCP_URL": mcp.url,
        "TUSHARE_CALL_TIMEOUT": CALL_TIMEOUT_S,
        "TUSHARE_RETRY_AFTER": "0",
    }


def _api(server: ServerProcess) -> Api:
    api = Api(server)
    api.http.headers["Authorization"] = f"Bearer {AGENT_KEY}"
    return api


@pytest.fixture(scope="module")
def secrets_server(
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    mcp: TushareMCP,
    tmp_path_factory: pytest.TempPathFactory,
    backend: Backend,
) -> Iterator[ServerProcess]:
    """One server holding all three secrets, its Tushare toolset connected once, unharmed."""
    data_dir = tmp_path_factory.mktemp("secrets")
    env = server_env(_llm_server, _meteo_server, data_dir, backend=backend, **secret_env(mcp))
    process = ServerProcess(env)
    api = _api(process)
    try:
        _llm_server.reset()
        _llm_server.script(text("你好。"))
        warm = api.run("tushare", run_body(f"t-warm-{uuid.uuid4().hex[:8]}", ("u1", "你好")))
        assert warm.last["type"] == "RUN_FINISHED", warm.events
        _llm_server.reset()
        yield process
    finally:
        api.close()
        process.stop()


@pytest.fixture
def api(secrets_server: ServerProcess) -> Iterator[Api]:
    client = _api(secrets_server)
    yield client
    client.close()


def wait_for_log(server: ServerProcess, start: int, needles: list[str]) -> str:
    """The server's log from line `start` on, once each of `needles` is in it."""
    deadline = time.monotonic() + LOG_WAIT_S
    while True:
        lines = "".join(server.log[start:])
        missing = [needle for needle in needles if needle not in lines]
        if not missing:
            return lines
        if time.monotonic() > deadline:
            raise AssertionError(f"the server never logged {missing}:\n{lines[-3000:]}")
        time.sleep(POLL_S)  # polling the child's output as it arrives, not a fixed wait


# --- what leaked where ---------------------------------------------------------------


def _form_of(piece: str) -> str:
    if "%" in piece:
        return "URL-encoded"
    if "\\" in piece:
        return "JSON-escaped"
    return "as written"


def leaks_in(outputs: dict[str, str], secret_ids: tuple[str, ...]) -> list[str]:
    """One line per (secret, output) with a leak: the forms found and a few fragments."""
    found = []
    for secret_id in secret_ids:
        for output, text_ in outputs.items():
            pieces = leaked(text_, SECRETS[secret_id][1])
            if pieces:
                forms = sorted({_form_of(piece) for piece in pieces})
                found.append(f"{secret_id} -> {output} ({', '.join(forms)}): {pieces[:3]}")
    return found


# --- the service: one upstream echoes one secret -------------------------------------


class Case:
    """One upstream echoing one secret at a server: an SSE run and a `/api/chat` run that
    meet it (`meet`), then a follow-up on each thread and the thread views (`follow_up`).

    Collects the SSE bytes, the chat bodies, the views, the server's log of its runs
    and every body the model was sent.
    """

    def __init__(self, upstream: Upstream, secret_id: str, api: Api, server: ServerProcess):
        self.upstream = upstream
        self.echo = Echo(upstream.template, (secret_id,), own=upstream.own)
        self.api = api
        self.server = server
        self.sse_thread, self.chat_thread = (f"t-secrets-{uuid.uuid4().hex[:10]}" for _ in "ab")
        self.hits = 0
        self.texts: dict[str, str] = dict.fromkeys(
            ("SSE", "/api/chat", "thread view", "server log", "model requests"), ""
        )

    def _sse(self, *messages: tuple[str, str]) -> tuple[str, str]:
        body = run_body(self.sse_thread, *messages)
        self.texts["SSE"] += self.api.run(self.upstream.graph, body).raw.decode("utf-8", "replace")
        return self.sse_thread, body["runId"]

    def _chat(self, message: str) -> tuple[str, str]:
        run_id = f"run-{uuid.uuid4().hex[:8]}"
        reply = self.api.chat(
            graph=self.upstream.graph, threadId=self.chat_thread, runId=run_id, message=message
        )
        self.texts["/api/chat"] += reply.text
        return self.chat_thread, run_id

    def _logged(self, llm: ScriptedLLM, work: Callable[[], list[tuple[str, str]]]) -> None:
        """Do `work` (its runs), keeping the log lines and model requests it caused."""
        start, asked = len(self.server.log), len(llm.requests)
        runs = work()
        needles = [f"run thread={thread} run={run} " for thread, run in runs]
        self.texts["server log"] += wait_for_log(self.server, start, needles)
        self.texts["model requests"] += "".join(
            json.dumps(body, ensure_ascii=False) + "\n" for body in llm.requests[asked:]
        )

    def meet(self, llm: ScriptedLLM, mcp: TushareMCP, meteo: FakeOpenMeteo) -> None:
        def work() -> list[tuple[str, str]]:
            self.upstream.arm(self.echo, mcp, meteo)
            try:
                llm.script(*self.upstream.turns(self.echo))
                streamed = self._sse(("u1", "查一下"))
                llm.script(*self.upstream.turns(self.echo))
                chatted = self._chat("查一下")
                self.hits = self.upstream.hits(self.echo, meteo)
            finally:
                mcp.stop_echo()
                meteo.reset()
            return [streamed, chatted]

        self._logged(llm, work)
        assert self.hits >= 2, (
            f"the runs met {self.upstream.id} {self.hits} time(s), not twice:\n"
            f"{self.texts['SSE'][-2000:]}\n{self.texts['/api/chat'][-2000:]}"
        )

    def follow_up(self, llm: ScriptedLLM) -> dict[str, str]:
        def work() -> list[tuple[str, str]]:
            llm.script(text("好的。"), text("好的。"))
            return [self._sse(("u1", "查一下"), ("u2", "继续")), self._chat("继续")]

        self._logged(llm, work)
        self.texts["thread view"] = "\n".join(
            self.api.http.get(f"/api/threads/{thread}").text
            for thread in (self.sse_thread, self.chat_thread)
        )
        return self.texts


@pytest.fixture(scope="module")
def connect_outputs(
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    tmp_path_factory: pytest.TempPathFactory,
    backend: Backend,
) -> Iterator[dict[str, dict[str, str]]]:
    """Per secret, the outputs of a toolset connect meeting the echo, on a server of its
    own (a connect that once succeeds is kept): every secret's runs first, then the
    follow-ups, whose connect succeeds, so the model sees what the failures left."""
    llm = _llm_server
    upstream = BY_ID["mcp_connect_malformed"]
    with TushareMCP(token=TUSHARE_TOKEN) as mcp:
        data_dir = tmp_path_factory.mktemp("connect")
        env = server_env(llm, _meteo_server, data_dir, backend=backend, **secret_env(mcp))
        process = ServerProcess(env)
        api = _api(process)
        try:
            cases = {secret_id: Case(upstream, secret_id, api, process) for secret_id in SECRETS}
            for case in cases.values():
                case.meet(llm, mcp, _meteo_server)
            yield {secret_id: case.follow_up(llm) for secret_id, case in cases.items()}
        finally:
            api.close()
            process.stop()


@pytest.mark.parametrize("secret_id", list(SECRETS))
@pytest.mark.parametrize("upstream_id", list(BY_ID))
def test_no_fragment_of_a_secret_an_upstream_echoes_reaches_a_client_the_log_or_the_model(
    upstream_id: str,
    secret_id: str,
    request: pytest.FixtureRequest,
    llm: ScriptedLLM,
    mcp: TushareMCP,
    meteo: FakeOpenMeteo,
    backend: Backend,  # asked for here: the servers below are fetched by name, per backend
) -> None:
    upstream = BY_ID[upstream_id]
    if upstream.connect:
        outputs = request.getfixturevalue("connect_outputs")[secret_id]
    else:
        case = Case(
            upstream,
            secret_id,
            request.getfixturevalue("api"),
            request.getfixturevalue("secrets_server"),
        )
        case.meet(llm, mcp, meteo)
        outputs = case.follow_up(llm)

    leaks = leaks_in(outputs, (secret_id,))
    assert not leaks, f"{upstream_id} echoing {secret_id} leaked:\n" + "\n".join(leaks)


# --- the CLI: processes that each meet several upstreams, every secret in one echo ---

MARK = "MARK"
RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ", re.MULTILINE)
RUN_ENDED = re.compile(r"^[^\n]* run thread=\S+ run=\S+ graph=\S+ outcome=")
# Phases run one after another; the processes of a phase side by side. The initialize
# echo answers every MCP session, so it has a phase of its own.
PHASES: tuple[tuple[str, ...], ...] = (
    ("llm_401", "llm_429", "llm_500", "meteo_error"),
    ("mcp_tool_error", "mcp_rpc_error", "mcp_malformed_result", "mcp_not_json_body"),
    ("mcp_malformed_initialize",),
)


def _last_user_text(body: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """The latest user message's text, and the messages after it."""
    messages = body.get("messages") or []
    last = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    content = messages[last].get("content")
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content or ""), messages[last + 1 :]


def cli_model(echoes: dict[str, Echo]) -> Callable[[dict[str, Any]], Turn]:
    """The model of the CLI phases, answering by the user's message, whatever the order:
    `mark <id>` -> the text `MARK <id>`; `case <id>` -> that upstream's turns."""

    def answer(body: dict[str, Any]) -> Turn:
        said, after = _last_user_text(body)
        kind, _, case_id = said.partition(" ")
        if kind == "mark":
            return text(f"{MARK} {case_id}")
        turns = BY_ID[case_id].turns(echoes[case_id], done=f"完成 {case_id}")
        replied = any(message.get("role") == "tool" for message in after)
        return turns[-1] if replied else turns[0]

    return answer


@dataclass
class CliProcess:
    """One CLI process for one graph, fed a line per message (its stdin is not a tty)."""

    cases: tuple[str, ...]
    process: subprocess.Popen[str]
    log: Path | None
    output: str = ""

    @classmethod
    def start(
        cls,
        env: dict[str, str],
        graph: str,
        cases: tuple[str, ...],
        *,
        server: str | None,
        log: Path | None,
    ) -> CliProcess:
        args = [REACT_AGENT, "chat", graph] + (["--server", server] if server else [])
        process = subprocess.Popen(
            args,
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,  # one pipe: the lines stay in the order written
            text=True,
            encoding="utf-8",
            errors="replace",
        )
        return cls(cases, process, log)

    def script(self) -> str:
        if len(self.cases) == 1:
            return f"case {self.cases[0]}\n"
        return "".join(f"mark {case}\ncase {case}\n" for case in self.cases)

    def finish(self) -> None:
        self.output, _ = self.process.communicate(self.script(), timeout=90)

    def console_of(self, case: str) -> str:
        """Its stdout/stderr from the marker of `case` to the next marker."""
        if len(self.cases) == 1:
            return self.output
        parts = re.split(rf"^{MARK} (\S+)[ \t]*$", self.output, flags=re.MULTILINE)
        by_case = dict(zip(parts[1::2], parts[2::2], strict=True))
        opening = parts[0] if case == self.cases[0] else ""
        assert case in by_case, f"no marker for {case}:\n{self.output}"
        return opening + by_case[case]

    def log_of(self, case: str) -> str:
        """Its cli.log records of the marker run and the run of `case`."""
        if self.log is None or not self.log.exists():
            return ""
        whole = self.log.read_text("utf-8")
        if len(self.cases) == 1:
            return whole
        starts = sorted({0, len(whole), *(match.start() for match in RECORD.finditer(whole))})
        records = [whole[a:b] for a, b in itertools.pairwise(starts)]
        runs: list[str] = [""]
        for record in records:
            runs[-1] += record
            if RUN_ENDED.match(record):
                runs.append("")
        ended = len(runs) - 1
        assert ended == 2 * len(self.cases), f"{ended} runs logged, not {2 * len(self.cases)}"
        index = self.cases.index(case)
        tail = runs[-1] if index == len(self.cases) - 1 else ""
        return runs[2 * index] + runs[2 * index + 1] + tail


@dataclass
class CliOutputs:
    by_case: dict[str, dict[str, str]]
    reached: dict[str, int]


@pytest.fixture(scope="module")
def cli_outputs(
    secrets_server: ServerProcess,
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    mcp: TushareMCP,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[CliOutputs]:
    """Per upstream: what a `chat --server` process and an in-process chat printed, and
    the in-process one's cli.log, each process meeting every upstream of its phase."""
    llm, meteo = _llm_server, _meteo_server
    outputs = CliOutputs({}, {})
    for phase in PHASES:
        echoes = {
            case: Echo(BY_ID[case].template, tuple(SECRETS), BY_ID[case].own) for case in phase
        }
        llm.reset()
        meteo.reset()
        llm.fallback = cli_model(echoes)
        for case in phase:
            BY_ID[case].arm(echoes[case], mcp, meteo)
        processes: list[tuple[str, CliProcess]] = []
        try:
            for graph in dict.fromkeys(BY_ID[case].graph for case in phase):
                cases = tuple(case for case in phase if BY_ID[case].graph == graph)
                local = tmp_path_factory.mktemp("cli")
                env = env_for_subprocess(llm, meteo, local, **secret_env(mcp))
                remote = CliProcess.start(env, graph, cases, server=secrets_server.url, log=None)
                here = CliProcess.start(env, graph, cases, server=None, log=local / "cli.log")
                processes += [("CLI --server stdout/stderr", remote), ("CLI stdout/stderr", here)]
            for _, process in processes:
                process.finish()
            for case in phase:
                outputs.reached[case] = BY_ID[case].hits(echoes[case], meteo)
        finally:
            for _, process in processes:
                if process.process.poll() is None:
                    process.process.kill()
            mcp.stop_echo()
            meteo.reset()
            llm.reset()
        for case in phase:
            texts: dict[str, str] = {}
            for name, process in processes:
                if case in process.cases:
                    texts[name] = process.console_of(case)
                    if process.log is not None:
                        texts["cli.log"] = process.log_of(case)
            outputs.by_case[case] = texts
    yield outputs


# The first test's set-up runs `cli_outputs`: every phase's CLI processes, 90 s each at most.
@pytest.mark.timeout(90 * len(PHASES) + 60)
@pytest.mark.parametrize("upstream_id", [case for phase in PHASES for case in phase])
def test_no_fragment_of_any_secret_an_upstream_echoes_reaches_the_cli_output_or_cli_log(
    upstream_id: str, cli_outputs: CliOutputs
) -> None:
    assert cli_outputs.reached[upstream_id] >= 2, "the CLI runs never reached the upstream"
    outputs = cli_outputs.by_case[upstream_id]

    leaks = leaks_in(outputs, tuple(SECRETS))
    assert not leaks, f"{upstream_id} leaked:\n" + "\n".join(leaks)


# --- the check itself ----------------------------------------------------------------


def test_the_fragment_check_finds_each_form_of_an_echo_and_nothing_once_masked() -> None:
    for secret_id, (_, value) in SECRETS.items():
        for form in FORMS.values():
            echoed = form(value)
            assert leaked(echoed, value), secret_id
            assert leaked(json.dumps({"message": echoed}), value), secret_id
            assert leaked(json.dumps({"nested": json.dumps({"m": echoed})}), value), secret_id
    masked = "Incorrect API key provided: *** | *** | https://upstream.example/v1/auth?key=***"
    assert not any(leaked(masked, value) for _, value in SECRETS.values())


def test_ids_the_client_sent_come_back_as_sent_though_they_share_a_piece_of_a_secret(
    server: ServerProcess, llm: ScriptedLLM
) -> None:
    # The id is the client's own; that it shares 8 characters with the model key is chance.
    thread_id = f"t-{OPENAI_SECRET[3:11]}-{uuid.uuid4().hex[:6]}"
    message_id = f"m-{OPENAI_SECRET[5:13]}"
    api = Api(server)
    try:
        llm.script(text(f"回答里引用了密钥 {OPENAI_SECRET}"))
        run = api.run("weather", run_body(thread_id, (message_id, "你好")))
        view = api.http.get(f"/api/threads/{thread_id}").json()
        runs = api.http.get(f"/api/threads/{thread_id}/runs").json()
    finally:
        api.close()

    started = run.events[0]
    assert (started["type"], started["threadId"]) == ("RUN_STARTED", thread_id)
    assert view["threadId"] == thread_id
    assert view["messages"][0]["id"] == message_id
    assert runs[0]["threadId"] == thread_id
    # Free text is still masked: the answer that quoted the key.
    assert "回答里引用了密钥 ***" in json.dumps(view, ensure_ascii=False)


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_a_secret_streamed_a_few_characters_at_a_time_is_masked_once_the_pieces_are_joined(
    server: ServerProcess, llm: ScriptedLLM, size: int
) -> None:
    said = f"密钥是 {OPENAI_SECRET}，已经记下。"
    llm.script(
        reasoning(
            f"用户给了 {OPENAI_SECRET} 这个值",
            tool_call("get_weather", {"location": f"北京 {OPENAI_SECRET}"}, chunk_size=size),
        ),
        text(said, chunk_size=size),
    )
    thread_id = f"t-{uuid.uuid4().hex[:8]}"
    api = Api(server)
    try:
        live = api.run("weather", run_body(thread_id, ("u1", "记住这个")))
        run_id = live.events[0]["runId"]
        replayed = api.join(thread_id, run_id)
    finally:
        api.close()

    for stream in (live, replayed):
        joined = {
            kind: "".join(e["delta"] for e in stream.events if e["type"] == kind)
            for kind in ("TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT", "TOOL_CALL_ARGS")
        }
        for kind, whole in joined.items():
            assert leaked(whole, OPENAI_SECRET) == [], (kind, whole)
            assert "***" in whole, (kind, whole)
        assert joined["TEXT_MESSAGE_CONTENT"] == "密钥是 ***，已经记下。"
        assert json.loads(joined["TOOL_CALL_ARGS"]) == {"location": "北京 ***"}
        assert all(e.get("delta") != "" for e in stream.events)
    assert [e["type"] for e in live.events] == [e["type"] for e in replayed.events]
