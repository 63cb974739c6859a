"""What `kvplan size` does once its options are parsed, importable without Typer (see kvplan.cli.launch)."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvplan.model.size import SizeReport


def size_report_for(model: str, revision: str | None = None, kv_cache_dtype: str = "auto", tp: int = 1,
                    pp: int = 1, *, quiet: bool = False) -> SizeReport:
    """Load `model` and size it, with vLLM's refusal (if the latest vLLM does not serve it) as a note: the library's
    kvplan.size (kvplan/api.py), with the CLI's spinner and warnings."""
    from kvplan import api
    from kvplan.cli.common import progress, warn

    return api.size(model, revision=revision, kv_cache_dtype=kv_cache_dtype, tp=tp, pp=pp, progress=progress(quiet),
                    on_warning=warn)


def print_size(report: SizeReport, *, json_: bool) -> None:
    """The report on stdout: JSON, or the Rich tables."""
    if json_:
        from kvplan.cli.console import print_json
        from kvplan.render.json import dumps

        print_json(dumps("size", report))
    else:
        from kvplan.cli.console import out
        from kvplan.render.size import render_size

        out().print(render_size(report))


def print_sglang_size(model: str, revision: str | None, kv_cache_dtype: str, tp: int, pp: int, *,
                      json_: bool) -> None:
    """`kvplan size --engine sglang`: SGLang's per-token cell and per-request Mamba state, per GPU."""
    from kvplan.cli.common import load_model
    from kvplan.errors import InvalidParameter
    from kvplan.sglang.size import sglang_size

    if pp != 1:
        raise InvalidParameter("--engine sglang: pipeline parallelism is not modelled for SGLang yet")
    spec = load_model(model, revision, quiet=json_)
    report = sglang_size(spec, tp=tp, kv_cache_dtype=kv_cache_dtype)
    if json_:
        from kvplan.cli.console import print_json
        from kvplan.render.json import dumps

        print_json(dumps("size-sglang", report))
    else:
        from kvplan.cli.console import out
        from kvplan.render.sglang_fit import render_sglang_size

        out().print(render_sglang_size(report))
