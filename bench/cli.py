"""`python -m bench`: run the plan, print the Markdown table, keep the raw JSON."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from datetime import datetime

from bench.plan import parser, plan_from_args
from bench.report import render
from bench.runner import log, run_plan


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; 0 when every phase ran (targets met or not), 1 if it was cut short."""
    args = parser().parse_args(argv)
    if args.from_raw is not None:
        markdown = render(json.loads(args.from_raw.read_text()))
        sys.stdout.write(markdown)
        if args.results is not None:
            args.results.write_text(markdown)
        return 0
    plan = plan_from_args(argv)
    try:
        import uvloop
    except ImportError:
        results = asyncio.run(run_plan(plan))
    else:
        # The servers run on uvloop (uvicorn's default when it is installed): so does the floor.
        results = uvloop.run(run_plan(plan))
    plan.raw_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    raw = plan.raw_dir / f"{stamp}-{plan.mode}.json"
    raw.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    markdown = render(results)
    sys.stdout.write(markdown)
    log(f"raw results: {raw}")
    if plan.results_md is not None:
        plan.results_md.write_text(markdown)
        log(f"report: {plan.results_md}")
    return 1 if results["meta"].get("aborted") else 0
