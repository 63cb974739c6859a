"""The process exit codes of every kvplan command.

0 ok, 1 a capacity check failed (`kvplan check` only), 2 bad input or environment.
"""
from __future__ import annotations

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2
