"""save_report's file handling: safe names, no escape from the reports directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.report import UnsafeReportPath, report_tool, safe_file_name, write_report
from tools.risk import risk_of
from tools.settings import ReportSettings


def test_save_report_is_sensitive_so_it_is_confirmed_first() -> None:
    save_report = report_tool(ReportSettings())
    assert save_report.name == "save_report"
    assert risk_of(save_report) == "sensitive"
    assert set(save_report.args) == {"title", "markdown"}


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("平安银行 000001.SZ 分析", "平安银行 000001.SZ 分析"),
        ("../../etc/passwd", "_.._etc_passwd"),
        ("..\\..\\windows", "_.._windows"),
        ("/abs/path", "_abs_path"),
        ("a:b*c?d", "a_b_c_d"),
        ("...", "report"),
        ("", "report"),
        ("  多余   空格  ", "多余 空格"),
    ],
)
def test_titles_become_file_names_without_separators(title: str, expected: str) -> None:
    assert safe_file_name(title) == expected


def test_a_very_long_title_is_shortened() -> None:
    assert len(safe_file_name("分析" * 200)) <= 80


def test_the_report_is_written_inside_the_directory(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    path = write_report("平安银行分析", "# 平安银行\n\n收盘 11.2", reports)
    assert path == (reports / "平安银行分析.md").resolve()
    assert path.read_text("utf-8") == "# 平安银行\n\n收盘 11.2\n"


def test_dot_dot_in_the_title_cannot_escape_the_directory(tmp_path: Path) -> None:
    box = tmp_path / "box"
    reports = box / "reports"
    path = write_report("../../escape", "x", reports)
    assert path.parent == reports.resolve()
    assert sorted(box.rglob("*")) == [reports, reports / "_.._escape.md"]
    assert not (tmp_path / "escape.md").exists()


def test_an_existing_report_is_not_overwritten(tmp_path: Path) -> None:
    first = write_report("日报", "one", tmp_path)
    second = write_report("日报", "two", tmp_path)
    assert second.name == "日报-2.md"
    assert first.read_text("utf-8") == "one\n"
    assert second.read_text("utf-8") == "two\n"


def test_a_symlink_pointing_outside_is_refused(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    outside = tmp_path / "outside.md"
    (reports / "日报.md").symlink_to(outside)
    with pytest.raises(UnsafeReportPath):
        write_report("日报", "x", reports)
    assert not outside.exists()


async def test_the_tool_names_the_report_within_its_directory_not_the_server_path(
    data_dir: Path,
) -> None:
    text = await report_tool(ReportSettings()).ainvoke({"title": "../茅台", "markdown": "# 茅台"})
    saved = data_dir / "reports" / "_茅台.md"
    assert text == "报告已保存：_茅台.md（报告目录内）"
    assert str(data_dir) not in text
    assert saved.read_text("utf-8") == "# 茅台\n"


def test_a_title_of_seventy_emoji_fits_the_file_systems_byte_limit(tmp_path: Path) -> None:
    title = "📈" * 70  # 280 bytes in UTF-8: over the 255-byte name limit

    first = write_report(title, "x", tmp_path)
    second = write_report(title, "y", tmp_path)

    assert len(first.name.encode()) <= 255
    assert len(second.name.encode()) <= 255
    assert second.name.endswith("-2.md")
    assert first.name.startswith("📈")


def test_format_and_control_characters_are_dropped_from_file_names() -> None:
    # U+202E flips how the rest of a name reads; zero-width and BOM characters hide.
    name = safe_file_name("报告\u202egpj.exe\u200b\ufeff\u0007")

    assert name == "报告gpj.exe"


async def test_the_tool_writes_where_its_settings_say(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"

    tool = report_tool(ReportSettings(agent_reports_dir=elsewhere))
    await tool.ainvoke({"title": "日报", "markdown": "# 日报"})

    assert (elsewhere / "日报.md").read_text("utf-8") == "# 日报\n"
