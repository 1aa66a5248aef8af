"""Peak memory of a Spark run: this process, the JVM and the Python workers (psutil), and the JVM heap."""

from __future__ import annotations

import threading


def process_kind(cmdline: list[str], parent_cmdline: list[str] | None) -> str | None:
    """"jvm", "worker" (a PySpark daemon or worker) or None (not counted) for one of the driver's
    descendants, from its command line and its parent's.

    A JVM that starts a program (Hadoop's local file system runs chmod, readlink, bash) forks
    first: until the exec, the child has the JVM's command line and shows the JVM's whole RSS,
    pages it shares with the JVM. Counting it doubled the JVM for that instant and, named after
    the forking thread ("Thread-4"), it was counted as a Python worker (a 1M-document run
    reported 4.9 GB of workers where the workers held 1.8 GB). Such a fork and the short-lived
    programs themselves are not counted.
    """
    if not cmdline:
        return None
    if cmdline[0].rsplit("/", 1)[-1] == "java":
        return None if parent_cmdline == cmdline else "jvm"
    if any(part in ("pyspark.daemon", "pyspark.worker") for part in cmdline):
        return "worker"
    return None


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
        used = {"jvm": 0.0, "worker": 0.0}
        for child in self.proc.children(recursive=True):
            try:
                parent = child.parent()
                kind = process_kind(child.cmdline(), parent.cmdline() if parent else None)
                if kind:
                    used[kind] += child.memory_info().rss / mb
            except psutil.Error:
                continue
        jvm, workers = used["jvm"], used["worker"]
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


def spilled_mb(spark) -> dict[str, float]:
    """Memory and disk spill, and shuffle bytes written, summed over every stage Spark's status
    store still holds.

    The store keeps spark.ui.retainedStages stages (1,000 by default) whether or not the UI
    runs; a bench that wants a whole job's spill sets it above the job's stage count, and
    reads this before and after the job (spill_between)."""
    mb = 1024 * 1024
    try:
        sc = spark.sparkContext
        empty = sc._jvm.java.util.ArrayList
        stages = sc._jsc.sc().statusStore().stageList(empty(), False, False,
                                                     sc._gateway.new_array(sc._jvm.double, 0), empty())
        memory = disk = shuffle = 0
        for i in range(stages.size()):
            stage = stages.apply(i)
            memory += stage.memoryBytesSpilled()
            disk += stage.diskBytesSpilled()
            shuffle += stage.shuffleWriteBytes()
        return {"spill_memory_mb": memory / mb, "spill_disk_mb": disk / mb, "shuffle_write_mb": shuffle / mb,
                "stages": float(stages.size())}
    except Exception:  # a deployment without the status store's Scala API
        return {}


def spill_between(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """The spill and shuffle writes of what ran between two spilled_mb readings (empty when either
    is unknown)."""
    if not before or not after:
        return {}
    return {k: after[k] - before[k] for k in ("spill_memory_mb", "spill_disk_mb", "shuffle_write_mb")}


def cpu_seconds() -> float:
    """CPU seconds (user + system) spent so far by this process and every process under it: the
    Spark JVM and the Python workers in local mode.

    On a shared machine a job's wall time follows the other jobs' load; its CPU time much less so,
    which makes it the fairer measure of how cost grows with size. A process that has exited is
    counted through its parent's children_* times once the parent has reaped it (the PySpark
    daemon reaps its forked workers); a live one through its own times, so none is counted twice."""
    import psutil

    total = 0.0
    me = psutil.Process()
    for proc in [me, *me.children(recursive=True)]:
        try:
            t = proc.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            continue
    return total
