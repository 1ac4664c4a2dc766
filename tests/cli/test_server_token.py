"""`react-agent chat|graphs --server URL --token TOKEN` (issue 29): the terminal signs in
as a user of the server with `--token` or AGENT_TOKEN (AGENT_API_KEY when neither is
given); a server that refuses it is one line saying what to do, exit 1.

The server asks for a key (AGENT_API_KEY, its admin's); the CLI's environment has none,
and the user's key is made in the server's database (tests/support/user_keys.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.cli.conftest import run_cli
from tests.cli.test_one_shot_and_errors import one_line
from tests.doubles.llm import ScriptedLLM, text
from tests.support import user_keys
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

ADMIN_KEY = "cli-token-admin-key"
WRONG_KEY = "ra_000000000000_" + "w" * 43
WHAT_TO_DO = "请用 --token 传入你的密钥或令牌，或设置环境变量 AGENT_TOKEN"


@pytest.fixture
def server(cli_env: dict[str, str]) -> Iterator[str]:
    """A `react-agent serve` that asks for a key; its base URL."""
    process = ServerProcess({**cli_env, "AGENT_API_KEY": ADMIN_KEY})
    try:
        yield process.url
    finally:
        process.stop()


@pytest.fixture
def alice(server: str, cli_env: dict[str, str]) -> str:
    """A user of the server; her key."""
    return user_keys.add_user(cli_env["AGENT_DB"], "alice")


def threads_of(server: str, key: str) -> list[str]:
    listed = httpx.get(
        f"{server}/api/threads", headers={"Authorization": f"Bearer {key}"}, timeout=10
    )
    assert listed.status_code == 200, listed.text
    return [thread["threadId"] for thread in listed.json()]


def test_with_a_user_s_token_the_terminal_chats_as_that_user(
    server: str, alice: str, cli_env: dict[str, str], llm: ScriptedLLM
) -> None:
    llm.script(text("你好，爱丽丝。"))
    done = run_cli(cli_env, "chat", "weather", "--server", server, "--token", alice, "-m", "你好")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "你好，爱丽丝。"

    # The thread is hers: listed for her, and not for another user.
    mine = threads_of(server, alice)
    assert len(mine) == 1
    bob = user_keys.add_user(cli_env["AGENT_DB"], "bob")
    assert threads_of(server, bob) == []


def test_agent_token_is_sent_without_the_flag_and_the_flag_wins_over_it(
    server: str, alice: str, cli_env: dict[str, str]
) -> None:
    from_env = run_cli({**cli_env, "AGENT_TOKEN": alice}, "graphs", "--server", server)
    assert from_env.returncode == 0, from_env.stderr
    assert [line.split()[0] for line in from_env.stdout.splitlines()] == ["weather", "tushare"]

    flag_wins = run_cli(
        {**cli_env, "AGENT_TOKEN": WRONG_KEY}, "graphs", "--server", server, "--token", alice
    )
    assert flag_wins.returncode == 0, flag_wins.stderr


def test_agent_api_key_is_still_sent_when_no_token_is_given(
    server: str, cli_env: dict[str, str]
) -> None:
    done = run_cli({**cli_env, "AGENT_API_KEY": ADMIN_KEY}, "graphs", "--server", server)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("command", ["chat", "graphs"])
def test_without_a_token_the_refusal_is_one_line_saying_what_to_pass_and_exit_1(
    server: str, cli_env: dict[str, str], command: str
) -> None:
    args = (
        ("chat", "weather", "--server", server, "-m", "你好")
        if command == "chat"
        else (
            "graphs",
            "--server",
            server,
        )
    )
    done = run_cli(cli_env, *args)
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert f"服务 {server} 拒绝访问（HTTP 401" in line
    assert WHAT_TO_DO in line
    assert done.stdout == ""


def test_a_wrong_token_is_refused_in_the_same_line_and_never_echoed(
    server: str, cli_env: dict[str, str]
) -> None:
    done = run_cli(
        cli_env, "chat", "weather", "--server", server, "--token", WRONG_KEY, "-m", "你好"
    )
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert "this key is not valid" in line  # the server's own reason
    assert WHAT_TO_DO in line
    assert WRONG_KEY not in done.stderr + done.stdout
