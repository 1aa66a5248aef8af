"""Peak memory of a Spark run: this process, the JVM and the Python workers (psutil), and the JVM heap."""

from __future__ import annotations

import threading

class MemorySampler:
    """Peak RSS of this process, the Spark JVM and the Python workers, sampled in a thread."""

    def __init__(self, interval: float = 0.25):
        import psutil

        self.proc = psutil.Process()
        self.interval = interval
        self.peak = {"driver_mb": 0.0, "jvm_mb": 0.0, "workers_mb": 0.0, "total_mb": 0.0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> dict[str, float]:
        import psutil

        mb = 1024 * 1024
        driver = self.proc.memory_info().rss / mb
        jvm = workers = 0.0
        for child in self.proc.children(recursive=True):
            try:
                name = child.name()
                rss = child.memory_info().rss / mb
            except psutil.Error:
                continue
            if name.startswith("java"):
                jvm += rss
            else:
                workers += rss
        return {"driver_mb": driver, "jvm_mb": jvm, "workers_mb": workers, "total_mb": driver + jvm + workers}

    def _run(self) -> None:
        while not self._stop.is_set():
            for k, v in self.sample().items():
                self.peak[k] = max(self.peak[k], v)
            self._stop.wait(self.interval)

    def __enter__(self) -> "MemorySampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def jvm_heap_peak_mb(spark) -> float | None:
    """Peak used heap of the driver JVM (the local executor lives there) from its memory pools."""
    try:
        pools = spark._jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans()
        total = 0
        for pool in pools:
            if str(pool.getType().toString()) == "Heap memory":
                total += pool.getPeakUsage().getUsed()
        return total / (1024 * 1024)
    except Exception:  # not available under every deployment
        return None


def reset_jvm_heap_peak(spark) -> None:
    try:
        for pool in spark._jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans():
            pool.resetPeakUsage()
    except Exception:
        pass
