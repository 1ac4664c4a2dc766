"""`save_report`: write an analysis to a Markdown file in the reports directory.

The tool is `sensitive`, so the tools node asks the user to confirm before it runs.
The title becomes a file name that cannot leave the directory: separators and other
unsafe characters are replaced, invisible format and control characters (such as
U+202E, which reverses how a name reads) are dropped, the name fits a file system's
255-byte limit with room for a `-N` suffix, and the resolved path is checked to be
inside. The model is told the report's name within the directory, never a server path.
A report is its user's data: the directory, when the tool creates it, is 0700 and every
report 0600 (`tools.files`), whatever the umask. A directory that exists already (one an
operator chose to share) keeps its mode.
"""

from __future__ import annotations

import asyncio
import os
import re
import unicodedata
from pathlib import Path

from langchain_core.tools import BaseTool, ToolException, tool

from tools.files import create_private, private_dir
from tools.risk import with_risk
from tools.settings import ReportSettings

SAVED = "报告已保存：{path}（报告目录内）"
REFUSED = "报告未保存：文件名「{name}」不在报告目录内"
WRITE_FAILED = "报告未保存：{reason}"
DEFAULT_NAME = "report"
MAX_NAME_CHARS = 80
# 255 bytes per file name (ext4, APFS, NTFS in UTF-16 units), less "-999.md".
MAX_NAME_BYTES = 255 - len("-999.md")
# Unicode categories that never belong in a file name: control, format (bidi
# overrides, zero-width), surrogate, private use, unassigned.
_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})

_UNSAFE = re.compile(r'[\\/:*?"<>|]+')


class UnsafeReportPath(ValueError):
    """The report's path would leave the reports directory."""


def safe_file_name(title: str) -> str:
    """A file name stem from `title`: no separators, no invisible characters, no leading
    dots, at most MAX_NAME_CHARS characters and MAX_NAME_BYTES UTF-8 bytes, not empty."""
    name = unicodedata.normalize("NFC", title)
    name = "".join(c for c in name if unicodedata.category(c) not in _INVISIBLE)
    name = _UNSAFE.sub("_", name)
    name = re.sub(r"\s+", " ", name).strip()
    name = name.lstrip(". ").rstrip(". ")
    name = name[:MAX_NAME_CHARS]
    name = name.encode()[:MAX_NAME_BYTES].decode(errors="ignore").rstrip(". ")
    return name or DEFAULT_NAME


def write_report(title: str, markdown: str, directory: Path) -> Path:
    """Write `markdown` to `<directory>/<safe title>.md` without overwriting; return the path.

    An existing report of the same title is kept; the new one gets a `-2`, `-3`... suffix.
    Raises UnsafeReportPath if the path would resolve outside `directory`.
    """
    private_dir(directory)
    root = directory.resolve()
    stem = safe_file_name(title)
    for attempt in range(1, 1000):
        name = f"{stem}.md" if attempt == 1 else f"{stem}-{attempt}.md"
        path = (root / name).resolve()
        if not path.is_relative_to(root) or path.parent != root:
            raise UnsafeReportPath(name)
        try:
            fd = create_private(path)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(markdown if markdown.endswith("\n") else markdown + "\n")
        return path
    raise FileExistsError(f"too many reports named {stem!r}")


def report_tool(settings: ReportSettings) -> BaseTool:
    """The `save_report` tool (risk `sensitive`), writing under `settings.agent_reports_dir`."""
    directory = settings.agent_reports_dir

    @tool("save_report")
    async def save_report(title: str, markdown: str) -> str:
        """把分析报告保存为 Markdown 文件（保存前会请用户确认）。

        Args:
            title: 报告标题，用作文件名，例如“平安银行 000001.SZ 分析 20250630”
            markdown: 报告全文（Markdown 格式）
        """
        try:
            path = await asyncio.to_thread(write_report, title, markdown, directory)
        except UnsafeReportPath as exc:
            raise ToolException(REFUSED.format(name=exc)) from None
        except OSError as exc:
            raise ToolException(
                WRITE_FAILED.format(reason=exc.strerror or type(exc).__name__)
            ) from None
        return SAVED.format(path=path.name)

    save_report.handle_tool_error = True  # the reason becomes the result, with status "error"
    return with_risk(save_report, "sensitive")
