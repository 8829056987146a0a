"""The progress bar of the long-running commands."""

from __future__ import annotations

import sys
import threading
import time


class Progress:
    """A one-line progress bar on stderr, shown only on a terminal and without ``-q``.

    ``total=None`` shows elapsed time only (or a bar against ``budget`` seconds):
    the solvers do not report how far they are, but a time budget is a bound.
    """

    WIDTH = 28

    def __init__(self, label: str, total: int | None = None, enabled: bool = True, budget: float | None = None):
        self.label = label
        self.total = total
        self.budget = budget
        self.done = 0
        self.enabled = enabled and sys.stderr.isatty()
        self.start = time.perf_counter()
        self._last = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def step(self, n: int = 1) -> None:
        self.done += n
        self.render()

    def render(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self._last < 0.1:
            return
        self._last = now
        elapsed = now - self.start
        if self.total:
            fraction, tail = self.done / self.total, f"{self.done}/{self.total}"
        elif self.budget:
            fraction, tail = min(elapsed / self.budget, 1.0), f"budget {self.budget:g} s"
        else:
            fraction, tail = None, ""
        if fraction is None:
            bar = "".join("=" if (i - int(elapsed * 8)) % 8 == 0 else " " for i in range(self.WIDTH))
        else:
            filled = int(round(fraction * self.WIDTH))
            bar = "#" * filled + "." * (self.WIDTH - filled)
        with self._lock:
            sys.stderr.write(f"\r{self.label} [{bar}] {tail} {elapsed:7.1f} s ")
            sys.stderr.flush()

    def __enter__(self) -> Progress:
        if self.enabled and self.total is None:
            # training reports nothing while it runs, so a thread keeps the clock moving
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()
        self.render(force=True)
        return self

    def _tick(self) -> None:
        while not self._stop.wait(0.25):
            self.render(force=True)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.enabled:
            with self._lock:
                sys.stderr.write("\r" + " " * (len(self.label) + self.WIDTH + 40) + "\r")
                sys.stderr.flush()

