"""`kvplan gpus`: list the GPU catalog, or show one GPU with the source of every figure."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

NAME = "gpus"
HELP = "List the GPU catalog (memory, bandwidth, dense TFLOPS), or one GPU with its sources."
EPILOG = (
    "Examples:\n\n"
    "  kvplan gpus\n\n"
    "  kvplan gpus h100\n\n"
    "  kvplan gpus --json --gpus-file my-gpus.yaml"
)


def command(
    gpu: Annotated[
        str | None,
        typer.Argument(help="Show one GPU: id, alias or device name (h100, \"NVIDIA H100 80GB HBM3\").",
                       show_default=False),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    gpus_file: Annotated[
        Path | None,
        typer.Option("--gpus-file", help="YAML file of GPUs to add or override by id "
                     "(default: $KVPLAN_GPUS_FILE).", show_default=False),
    ] = None,
) -> None:
    """List the GPU catalog, or show one GPU with the source of every figure."""
    from kvplan.cli.console import out, print_json
    from kvplan.hardware.gpus import find_gpu, load_catalog

    catalog = load_catalog(gpus_file)
    specs = [find_gpu(gpu, catalog)] if gpu is not None else list(catalog.values())
    if json_output:
        from kvplan.render.gpus import gpu_data
        from kvplan.render.json import dumps

        print_json(dumps("gpus", {"gpus": [gpu_data(spec) for spec in specs]}))
        return
    from kvplan.render.gpus import catalog_table, gpu_detail

    out().print(gpu_detail(specs[0]) if gpu is not None else catalog_table(specs))
