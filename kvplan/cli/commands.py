"""The top-level help's text: the commands with their one-line help, the app's help, its options' help.

Both the Typer app (kvplan.cli.app) and the Typer-free `kvplan --help` (kvplan.cli.launch) are built
from these, so they cannot drift apart. Importing this module imports nothing.
"""
from __future__ import annotations

APP_HELP = "KV-cache sizing and capacity planning for vLLM: how much fits, will it start, how fast."
VERSION_HELP = "Show the version."
HELP_OPTION_HELP = "Show this message and exit."  # Click's own help option
HELP_OPTION_NAMES = ["-h", "--help"]

# Every command with the one line `kvplan --help` shows for it, in that order. A command's module (its
# options, its imports) is imported only when the command runs or shows its own help, so `kvplan --help`
# and `kvplan size` do not pay for the other commands. Each line equals its module's HELP (a test checks).
COMMANDS: dict[str, str] = {
    "size": "KV-cache bytes per token (per layer kind, per GPU) and the weights' size of a model.",
    "fit": "Will it start, how many KV blocks and tokens, how much concurrency: vLLM's own sizing, per GPU.",
    "roofline": "Decode and prefill speed limits on a GPU: ridge point, tokens/s by batch, memory- or compute-bound.",
    "gpus": "List the GPU catalog (memory, bandwidth, dense TFLOPS), or one GPU with its sources.",
    "diagnose": "Read a vLLM server's /metrics (live or saved) and diagnose KV shortage, batch limits, "
                "prefix-cache misses.",
    "calibrate": "Read a vLLM startup log, compare it with kvplan's prediction term by term, and print the "
                 "overrides.",
    "check": "Check a plan of deployments against capacity requirements (CI gate: exit 1 when one fails).",
    "simulate": "Simulate vLLM's block pool (prefix caching) and scheduler step by step.",
}
