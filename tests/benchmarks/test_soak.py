"""The soak (benchmarks/soak.py) at a small size: mixed load on one local store and on one HTTP server, sampled
every second. Nothing acknowledged lost, nothing forgotten returned, and every sample holds each process's
figures. (The long form, 30 minutes, is a benchmark: see benchmarks/README.md.)"""

from __future__ import annotations

import json
import math
from pathlib import Path

from benchmarks import soak

OPS = {"remember", "recall", "list", "forget", "forget_matching", "replaces", "import", "compact", "checkpoint"}


def _numbers(sample: dict[str, object], keys: list[str], least: float = 1e-9) -> None:
    for key in keys:
        value = sample[key]
        assert isinstance(value, int | float) and not math.isnan(value) and value >= least, (key, value)


def test_local_soak_loses_nothing_and_samples_every_process(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    assert soak.main(["--quick", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["lost"] == 0 and result["forgotten_returned"] == 0, result
    assert set(result["ops"]) >= OPS, result["ops"]  # every kind of operation ran, interleaved
    assert result["acknowledged_adds"] > 50 and result["acknowledged_forgets"] > 10
    assert result["reader_checks"] > result["acknowledged_adds"]  # the reader checked each ack, and more
    samples = result["samples"]
    assert len(samples) >= 5
    procs = [f"w{n}" for n in range(result["procs"])] + ["reader"]
    for sample in samples[:-1]:  # (the last may see a process exiting)
        _numbers(sample, [f"{p}.{k}" for p in procs for k in ("rss_mb", "fds", "threads")])
        _numbers(sample, ["recall_ms"])
        _numbers(sample, ["bytes.journal", "bytes.vectors"], least=0)  # may read 0 while a compaction swaps the files
    assert {"workers.rss_mb", "reader.fds", "bytes.journal", "recall_ms"} <= set(result["slopes_per_hour"])
    assert all(s["per_hour"] is not None for s in result["slopes_per_hour"].values())


def test_http_soak_sessions_come_and_go_and_lose_nothing(tmp_path: Path) -> None:
    out = tmp_path / "soak_http.json"
    assert soak.main(["--http", "--quick", "--rate", "2", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["lost"] == 0 and result["forgotten_returned"] == 0 and result["errors"] == 0, result
    assert result["server_alive"]
    assert result["sessions_opened"] > result["sessions"]  # sessions were closed and opened again
    assert result["sessions_abandoned"] + result["sessions_closed"] > 0 and result["acknowledged_memories"] > 0
    assert len(result["samples"]) >= 5
    for sample in result["samples"]:
        _numbers(sample, ["rss_mb", "fds", "threads"])
    assert {"rss_mb", "fds", "threads"} <= set(result["slopes_per_hour"])
