"""A session's kit on each Dask worker (profctl.pipelines.executors.WorkerKit: its warm children, NVML samplers),
kept by a worker plugin. Imported only where Dask runs (profctl.pipelines.dask_executor), as Dask itself."""

from __future__ import annotations

from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

from profctl.pipelines.executors import WorkerKit
from profctl.pipelines.warm import Adoption, WarmCommand, WarmPool


class KitPlugin(WorkerPlugin):
    """Made when the worker starts (a local cluster's) or when the session connects (a cluster of yours); torn
    down when the session closes it (:func:`close_kit`) or the worker ends. `child_env`: what every child of the
    worker gets (a local cluster's worker thread: its GPU too). `adopt`: the warm child the session started for
    this worker (a local cluster); else, with `warm`, the worker starts its warm child at once, so that its
    Python, torch and CUDA context are ready by the time the first part arrives. `in_session`: the worker is a
    thread of the session's own process."""

    def __init__(self, name: str, child_env: dict[str, str | None], warm: WarmCommand | None = None,
                 adopt: Adoption | None = None, in_session: bool = False) -> None:
        self.name, self.child_env, self.warm, self.adopt = name, dict(child_env), warm, adopt
        self.in_session = in_session
        self.kit: WorkerKit | None = None

    def setup(self, worker: Any = None) -> None:
        self.kit = WorkerKit(WarmPool(self.child_env, adopt=self.adopt), in_session=self.in_session)
        if self.warm is not None and self.adopt is None:
            try:
                self.kit.pool.prestart(self.warm)
            except Exception:  # the first part starts it again and says why it cannot
                pass

    def teardown(self, worker: Any = None) -> None:
        if self.kit is not None:
            self.kit.close()
            self.kit = None


def close_kit(name: str, dask_worker: Any = None) -> None:
    """Run on every worker at the session's end: its kit's children stopped, the plugin dropped."""
    plugin = (getattr(dask_worker, "plugins", None) or {}).pop(name, None)
    if plugin is not None:
        plugin.teardown(dask_worker)


def kit_of(worker: Any, name: str) -> tuple[WorkerKit, bool]:
    """The session's kit on this worker, or -- a worker the session's plugin did not reach -- one for this part
    alone (True: the part closes it)."""
    plugin = (getattr(worker, "plugins", None) or {}).get(name)
    if plugin is not None and getattr(plugin, "kit", None) is not None:
        return plugin.kit, False
    return WorkerKit(WarmPool()), True
