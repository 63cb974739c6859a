"""`kvplan diagnose`: read a running vLLM server's /metrics and say what limits it."""
from __future__ import annotations

from typing import Annotated

import typer

NAME = "diagnose"
HELP = "Read a vLLM server's /metrics (live or saved) and diagnose KV shortage, batch limits, prefix-cache misses."
EPILOG = (
    "Examples:\n\n"
    "  kvplan diagnose http://localhost:8000/metrics\n\n"
    "  kvplan diagnose http://localhost:8000 --interval 30 --kv-high 0.95\n\n"
    "  curl -s localhost:8000/metrics > m.txt && kvplan diagnose m.txt --json"
)


def command(
    source: Annotated[str, typer.Argument(
        metavar="URL|FILE", help="The server's metrics URL (http://host:8000/metrics; a bare host:port URL gets "
        "/metrics) or a saved Prometheus text file.")],
    interval: Annotated[float | None, typer.Option(
        "--interval", metavar="S", help="Scrape twice, S seconds apart, to turn counters into rates and "
        "quantiles into those of the window (URL only).")] = None,
    timeout: Annotated[float, typer.Option("--timeout", metavar="S", help="Seconds to wait for the server.")] = 5.0,
    kv_high: Annotated[float, typer.Option(
        "--kv-high", help="KV cache usage (0–1) at or above which the cache counts as full.")] = 0.9,
    hit_rate_low: Annotated[float, typer.Option(
        "--hit-rate-low", help="Prefix-cache hit rate (0–1) below which sharing is judged broken.")] = 0.1,
    min_prefix_queries: Annotated[int, typer.Option(
        "--min-prefix-queries", help="Prompt tokens looked up in the prefix cache before the hit rate is "
        "judged.")] = 1000,
    queue_p95_high: Annotated[float, typer.Option(
        "--queue-p95-high", metavar="S", help="Queue-time p95 (seconds) above which high_queue_time is "
        "reported.")] = 1.0,
    max_num_seqs: Annotated[int | None, typer.Option(
        "--max-num-seqs", help="The server's --max-num-seqs, if known: tells which batch limit binds.")] = None,
    plan: Annotated[str | None, typer.Option(
        "--plan", metavar="MODEL", help="Compare the server's num_gpu_blocks with kvplan's prediction for "
        "MODEL (with --gpu).")] = None,
    gpu: Annotated[str | None, typer.Option("--gpu", help="The GPU for --plan.")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Read a vLLM server's /metrics (live or saved) and diagnose what limits it."""
    from kvplan.cli.console import err, out, print_json
    from kvplan.diagnose import Thresholds, diagnose
    from kvplan.errors import InvalidParameter
    from kvplan.metrics import is_url, parse_exposition, read_exposition, scrape_twice
    from kvplan.render.diagnose import render_diagnose
    from kvplan.render.json import dumps

    if timeout <= 0:
        raise InvalidParameter(f"--timeout must be positive, got {timeout:g}")
    thresholds = Thresholds(kv_high=kv_high, hit_rate_low=hit_rate_low, min_prefix_queries=min_prefix_queries,
                            queue_p95_high_s=queue_p95_high, max_num_seqs=max_num_seqs)
    if plan is not None or gpu is not None:
        # TODO(lead): wire --plan/--gpu to the capacity module. Predict num_gpu_blocks and block_size for
        # MODEL on GPU, then for each engine e of the report:
        #   c = kvplan.diagnose.compare_with_plan(e.cache_config, predicted_blocks, predicted_block_size)
        # and return DiagnoseReport(..., plan=(c, ...)) with plan_diagnosis(c, e.model_name, e.engine)
        # appended to its diagnoses.
        raise InvalidParameter("--plan is not available yet")
    if interval is None:
        report = diagnose(parse_exposition(read_exposition(source, timeout)), thresholds=thresholds, source=source)
    else:
        if not is_url(source):
            raise InvalidParameter("--interval needs a URL: a saved file does not change between two reads")
        err().print(f"Scraping twice, {interval:g} s apart…")
        scrapes = scrape_twice(source, interval, timeout)
        report = diagnose(scrapes.second, scrapes.first, scrapes.elapsed_s, thresholds, source=source)
    if json_output:
        print_json(dumps("diagnose", report))
    else:
        out().print(render_diagnose(report))
