"""The GPU tests run their commands in-process (CliRunner): an interrupt of the session (benchmarks/gpu.sh's
`timeout -s INT`, Ctrl-C) that lands inside a command stops the session, instead of failing that one test with
"interrupted; ..." while the rest run on (tests/conftest.py, reraise_interrupt)."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from tests.conftest import reraise_interrupt


@pytest.fixture(autouse=True)
def _interrupts_stop_the_session(monkeypatch: pytest.MonkeyPatch) -> None:
    invoke = CliRunner.invoke

    def checked(self: CliRunner, *args: Any, **kwargs: Any) -> Any:
        return reraise_interrupt(invoke(self, *args, **kwargs))

    monkeypatch.setattr(CliRunner, "invoke", checked)
