"""The vector index: an hnswlib cosine graph over the vector rows, checkpointed to disk, always rebuildable.

Labels are vector-file rows, so the index needs no id map of its own: the store maps rows to memories.
It is derived data (see journal.py for the crash story) and implements replay.DerivedIndex.

hnswlib facts this wrapper handles (see the hnswlib README's "Python bindings" for the full method list):

==================  =============================================================================================
`add`               grows the graph with `resize_index` before it is full (capacity doubles); not thread-safe
                    with `knn_query` (hnswlib #590): the store serialises all calls under its lock
`remove`            `mark_deleted`: a deleted row is never returned again, and stays deleted in checkpoints
`search`            k is clamped to the live count (#93 raises otherwise); ef is raised to at least k
`save`              never on the hot path (it rewrites the whole file, #36); new file + fsync + dir fsync, then
                    `index.json` names it (durable.CheckpointFiles), so a crash mid-save keeps the old checkpoint.
                    hnswlib writes the file in native code (the file layer sees it created, synced and renamed,
                    not written) and reports no write error: its header and size are checked before it is named
`load`              checks the checkpoint's generation, size, CRC-32 and the hnswlib header before handing the
                    file to hnswlib: a malformed file can crash the process on load (PR #677)
==================  =============================================================================================
"""

from __future__ import annotations

import contextlib
import errno
import logging
import mmap
import os
import struct
import threading
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import hnswlib  # type: ignore[import-untyped, unused-ignore]
import numpy as np

from memserver.durable import OS, CheckpointError, CheckpointFiles, FileLayer
from memserver.local.replay import AddRecord

log = logging.getLogger(__name__)

META_NAME = "index.json"
# M: links per node; 16 keeps the graph ~1.7 kB/vector at dim 384 (RSS at 1M) with recall@10 >= 0.99 at ef 128.
DEFAULT_M = 16
# ef_construction: candidate list while building; 200 is hnswlib's recommended quality setting. Build time is about
# proportional to it (100k rows, dim 384, 2 busy cores: 171 s at 200, 83 s at 100, 57 s at 64). 100 kept recall@10
# at 1.0 at 100k on clustered vectors but gave 0.944 at 1M (ef 128; 0.982 at ef 512), so 200 stays (README
# "Store"). It only shapes how the graph is built: a checkpoint built with another value is loaded and used as is.
DEFAULT_EF_CONSTRUCTION = 200
# ef: candidate list while searching (raised to k when k is larger). At 1M clustered vectors (ef_construction 200)
# recall@10 was 0.979 / 0.996 / 0.999 at ef 128 / 192 / 256, p50 0.51 / 0.56 / 0.62 ms (README "Store").
DEFAULT_EF = 256
_INITIAL_CAPACITY = 1024
# hnswlib's saveIndex header: offsetLevel0, max_elements, cur_element_count, size_data_per_element, label_offset,
# offsetData (6 x size_t), maxlevel (int), enterpoint_node (uint32), maxM, maxM0, M (3 x size_t), mult (double),
# ef_construction (size_t).
_HEADER = struct.Struct("<6Q i I 3Q d Q")


def _crc_file(path: Path) -> int:
    """CRC-32 of a file, read through a map (no copies: 1.7 GB in ~0.7 s, against ~1 s reading 8 MB chunks)."""
    crc = 0
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if not size:
            return crc
        with mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as mm:
            view = memoryview(mm)
            try:
                for start in range(0, size, 64 << 20):
                    crc = zlib.crc32(view[start : start + (64 << 20)], crc)
            finally:
                view.release()
    return crc


def graph_file_chunks(state: dict[str, Any]) -> tuple[bytes, memoryview, memoryview]:
    """The bytes hnswlib's saveIndex writes, from a `VectorIndex.copy_graph` state: the header, the level-0
    data of every element, then each element's upper-level links (their byte count as uint32, then the links)."""
    n = int(state["cur_element_count"])
    header = _HEADER.pack(
        *(state[k] for k in ("offset_level0", "max_elements", "cur_element_count", "size_data_per_element")),
        *(state[k] for k in ("label_offset", "offset_data", "max_level")),
        int(state["enterpoint_node"]) & 0xFFFFFFFF,  # (uint32: -1 in an empty graph)
        *(state[k] for k in ("max_M", "max_M0", "M", "mult", "ef_construction")),
    )
    levels = np.asarray(state["element_levels"][:n], dtype=np.int64)
    sizes = np.where(levels > 0, levels * int(state["size_links_per_element"]), 0).astype("<u4")
    links = np.asarray(state["link_lists"]).view(np.uint8).reshape(-1)
    if int(sizes.sum()) != links.size:
        raise ValueError("hnswlib's state: link lists do not match the element levels")
    upper = np.zeros(4 * n + links.size, dtype=np.uint8)
    starts = 4 * np.arange(n, dtype=np.int64)  # where each element's count goes: after the links before it
    starts[1:] += np.cumsum(sizes[:-1], dtype=np.int64)
    upper[(starts[:, None] + np.arange(4)).reshape(-1)] = sizes.view(np.uint8)
    if links.size:
        linked = sizes > 0
        lengths = sizes[linked].astype(np.int64)
        before = np.zeros(len(lengths), dtype=np.int64)
        before[1:] = np.cumsum(lengths[:-1])
        upper[np.repeat(starts[linked] + 4 - before, lengths) + np.arange(links.size)] = links
    return header, np.ascontiguousarray(state["data_level0"]).view(np.uint8).data, upper.data


def _checkpoint_files(folder: Path, files: FileLayer) -> CheckpointFiles:
    return CheckpointFiles(folder, META_NAME, "index", "hnsw", files)


class VectorIndex:
    """An hnswlib cosine index keyed by vector row, with an atomic on-disk checkpoint.

    Checkpoint files are written through `files` (a durable.FileLayer; the real file system by default).
    """

    name = "vector"

    def __init__(
        self,
        dim: int,
        M: int = DEFAULT_M,
        ef_construction: int = DEFAULT_EF_CONSTRUCTION,
        ef: int = DEFAULT_EF,
        *,
        files: FileLayer = OS,
    ) -> None:
        self.dim = dim
        self.files = files
        self.M = M
        self.ef_construction = self._configured_ef_construction = ef_construction
        self.ef = ef
        self._pending_crc: tuple[str, threading.Thread, list[int | Exception]] | None = None
        self.reset()

    # --- DerivedIndex hooks ----------------------------------------------------------------------------------

    def reset(self) -> None:
        self.ef_construction = self._configured_ef_construction  # a loaded checkpoint may have built with another
        self._index = self._new_index(_INITIAL_CAPACITY)
        self._live = 0

    def _new_index(self, capacity: int) -> hnswlib.Index:
        index = hnswlib.Index(space="cosine", dim=self.dim)
        index.init_index(max_elements=capacity, M=self.M, ef_construction=self.ef_construction)
        index.set_ef(self.ef)
        return index

    def add(self, records: Sequence[AddRecord], vectors: np.ndarray) -> None:
        if not records:
            return
        rows = np.fromiter((r.row for r in records), dtype=np.int64, count=len(records))
        self.add_rows(rows, vectors)

    def add_rows(self, rows: np.ndarray, vectors: np.ndarray) -> None:
        """Insert vectors under their row labels, growing the graph first if it would overflow."""
        need = self._index.get_current_count() + len(rows)
        capacity = self._index.get_max_elements()
        if need > capacity:
            while capacity < need:
                capacity *= 2
            self._index.resize_index(capacity)
        # One thread for small batches: spawning threads costs more than it saves.
        self._index.add_items(vectors, rows, num_threads=1 if len(rows) < 256 else -1)
        self._live += len(rows)

    def remove(self, records: Sequence[AddRecord]) -> None:
        for r in records:
            try:
                self._index.mark_deleted(r.row)
                self._live -= 1
            except RuntimeError:  # unknown or already deleted: the result is the same
                pass

    # --- queries -----------------------------------------------------------------------------------------------

    @property
    def live_count(self) -> int:
        return self._live

    @property
    def max_elements(self) -> int:
        return int(self._index.get_max_elements())

    def search(
        self, query: np.ndarray, k: int, filter: Callable[[int], bool] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The k nearest rows and their cosine similarities, best first; k clamped to the live count.

        Raises RuntimeError when hnswlib cannot find k results (a restrictive filter); callers fall back to exact.
        """
        k = min(k, self._live)
        if k <= 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        self._index.set_ef(max(self.ef, k))
        labels, distances = self._index.knn_query(query.reshape(1, -1), k=k, num_threads=1, filter=filter)
        return labels[0].astype(np.int64), (1.0 - distances[0]).astype(np.float32)

    def params(self) -> dict[str, int]:
        return {
            "M": self.M,
            "ef_construction": self.ef_construction,
            "ef": self.ef,
            "max_elements": self.max_elements,
        }

    # --- checkpoints -------------------------------------------------------------------------------------------

    def save(self, folder: Path, stamp: dict[str, Any]) -> None:
        """Write a checkpoint covering `stamp` (generation, offset, count); the old one stays until replaced.

        Call with the store's exclusive lock held, so no other process is loading the file this one replaces.
        """
        self.commit(folder, self.write_graph(folder, stamp), self.files)

    def write_graph(self, folder: Path, stamp: dict[str, Any], name: str | None = None) -> dict[str, Any]:
        """Write the graph to `folder/name` (synced; no lock needed) and return the checkpoint that describes it.

        hnswlib writes the file in native code, without reporting write errors (a full disk leaves it short), so
        the written file's header and size are checked here: a short file raises OSError (EIO) and is removed.
        """
        checkpoint = _checkpoint_files(folder, self.files)
        name = name or checkpoint.new_name()
        checkpoint.write_native(name, self._index.save_index)
        return self.described(folder / name, name, stamp, int(self._index.get_current_count()))

    def copy_graph(self) -> dict[str, Any] | None:
        """The graph as hnswlib's pickle state (its arrays copied: about the graph's size in memory, ~1 s at 1M
        where save_index takes seconds to tens of seconds), from which `graph_file_chunks` makes the bytes
        save_index writes, while the index changes (checkpoint_job.py). None for a state format not known here."""
        state: dict[str, Any] = self._index.__getstate__()[0]  # type: ignore[attr-defined]  # (pybind11's pickle)
        return state if state.get("ser_version") == 1 else None

    def dump_graph(self, path: Path) -> int:
        """Write the graph to the new file `path`, not synced (`described` syncs and checks it); returns its
        element count. The fast part of a checkpoint written outside the exclusive lock (checkpoint_job.py): the
        graph goes to the page cache while the process's own writers wait; the sync and CRC follow without them."""
        elements = int(self._index.get_current_count())
        self.files.close(self.files.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
        try:
            self._index.save_index(str(path))
        except BaseException:
            with contextlib.suppress(OSError):
                self.files.unlink(path)
            raise
        return elements

    def described(self, path: Path, name: str, stamp: dict[str, Any], elements: int) -> dict[str, Any]:
        """Check the graph file at `path` (synced, to be named `name`) and return the checkpoint meta for it."""
        meta = {
            **stamp,
            "file": name,
            "size": path.stat().st_size,
            "crc32": _crc_file(path),
            "dim": self.dim,
            "M": self.M,
            "ef_construction": self.ef_construction,
            "elements": elements,
        }
        reason = self._check_graph(path, meta)
        if reason:
            self.files.unlink(path)
            raise OSError(errno.EIO, f"hnswlib wrote an unusable graph file ({reason}); is the disk full?", str(path))
        return meta

    def checkpoint_files(self, folder: Path) -> CheckpointFiles:
        """The checkpoint's files in `folder` (the meta naming the graph file in force)."""
        return _checkpoint_files(folder, self.files)

    @staticmethod
    def commit(folder: Path, meta: dict[str, Any], files: FileLayer = OS) -> None:
        """Make `meta` (from write_graph) the checkpoint in force, and remove other graph files. Exclusive lock.

        Also right after the caller renamed the graph file into `folder` itself: the folder is synced first.
        """
        _checkpoint_files(folder, files).commit(meta)

    def prepare(self, folder: Path, generation: str) -> int | None:
        """Start computing the CRC-32 of the checkpoint's graph file in a thread (zlib and file reads release the
        GIL), so that it overlaps the rest of the store's open; `load` waits for it before trusting the file.

        Returns the journal offset the checkpoint claims to cover (None if there is none for `generation`); `load`
        may still reject it. Call with the store's lock held, and call `load` before releasing it.
        """
        self._pending_crc = None
        checkpoint = _checkpoint_files(folder, self.files)
        try:
            meta = checkpoint.read_meta()
            if meta is None or meta.get("generation") != generation or not isinstance(meta.get("offset"), int):
                return None
            path = checkpoint.path_of(meta)
        except CheckpointError:
            return None  # load() reports it
        result: list[int | Exception] = []

        def run() -> None:
            try:
                result.append(_crc_file(path))
            except Exception as exc:  # handed to load(), which reports it
                result.append(exc)

        thread = threading.Thread(target=run, name="hnsw-crc", daemon=True)
        thread.start()
        self._pending_crc = (str(meta["file"]), thread, result)
        return int(meta["offset"])

    def _graph_crc(self, path: Path) -> int:
        """The graph file's CRC-32: from the thread `prepare` started for this file, else computed now."""
        pending = self._pending_crc
        if pending is not None and pending[0] == path.name:
            pending[1].join()
            got = pending[2][0]
            if isinstance(got, Exception):
                raise got
            return got
        return _crc_file(path)

    def load(self, folder: Path, generation: str) -> dict[str, Any] | None:
        """Load the checkpoint if it is for `generation` and passes every check; else None (caller rebuilds)."""
        try:
            return self._load(folder, generation)
        finally:
            self._pending_crc = None  # used or not, a CRC started by prepare() serves this load only

    def _load(self, folder: Path, generation: str) -> dict[str, Any] | None:
        checkpoint = _checkpoint_files(folder, self.files)
        try:
            meta = checkpoint.read_meta()
        except CheckpointError as exc:
            log.warning("index checkpoint %s; rebuilding the index", exc)
            return None
        if meta is None:
            return None
        reason = self._check(checkpoint, meta, generation)
        if reason:
            log.warning("index checkpoint in %s not used: %s; rebuilding the index from the journal", folder, reason)
            return None
        path = checkpoint.path_of(meta)
        index = hnswlib.Index(space="cosine", dim=self.dim)
        try:
            index.load_index(str(path), max_elements=max(int(meta["elements"]) * 2, _INITIAL_CAPACITY))
        except (RuntimeError, ValueError, MemoryError) as exc:
            log.warning("index checkpoint %s failed to load (%s); rebuilding the index", path, exc)
            return None
        index.set_ef(self.ef)
        self._index = index
        self._live = int(meta["count"])
        self.ef_construction = int(meta["ef_construction"])  # the graph keeps building with its own value
        return meta

    def _check(self, checkpoint: CheckpointFiles, meta: dict[str, Any], generation: str) -> str | None:
        """Why the checkpoint described by `meta` must not be trusted, or None if it may be loaded."""
        try:
            if meta.get("generation") != generation:
                return "it belongs to another journal generation"
            if (meta.get("dim"), meta.get("M")) != (self.dim, self.M) or not isinstance(meta["ef_construction"], int):
                return "its parameters differ from the configured ones"
            try:
                path = checkpoint.path_of(meta)
            except CheckpointError as exc:
                return str(exc)
            if not path.is_file():
                return "its graph file is missing"
            reason = self._check_graph(path, meta)
            if reason:
                return reason
            if self._graph_crc(path) != meta["crc32"]:
                return "graph file CRC-32 mismatch (damaged on disk)"
        except (KeyError, TypeError, ValueError, OSError) as exc:
            return f"malformed checkpoint ({exc!r})"
        return None

    def _check_graph(self, path: Path, meta: dict[str, Any]) -> str | None:
        """Why the graph file at `path` does not match `meta` (size, header, layout), or None; CRC aside.

        hnswlib trusts the file it loads (a malformed one can crash the process, PR #677), so load checks this
        first. It reports no write error when it saves one, so a save checks the file it wrote the same way: a
        file cut short anywhere but in its last part (the upper-level links, ~0.3% of the file at dim 384) is
        caught here; one cut there is refused by hnswlib's own size check on the next load (then rebuilt).
        """
        try:
            size = path.stat().st_size
            if size != meta["size"]:
                return f"graph file size {size} != recorded {meta['size']}"
            with open(path, "rb") as f:
                head = f.read(_HEADER.size)
            if len(head) < _HEADER.size:
                return "graph file shorter than its header"
            (off0, _max_el, count, per_el, label_off, off_data, _maxlevel, entry, max_m, max_m0, m, _mult, efc) = (
                _HEADER.unpack(head)
            )
            links0 = max_m0 * 4 + 4
            if (off0, m, max_m, max_m0, efc) != (0, self.M, self.M, 2 * self.M, meta["ef_construction"]):
                return "graph header does not match M / ef_construction"
            if per_el != links0 + self.dim * 4 + 8 or off_data != links0 or label_off != links0 + self.dim * 4:
                return "graph header has a wrong element layout"
            if count != meta["elements"] or (count and entry >= count) or size < _HEADER.size + count * (per_el + 4):
                return "graph header disagrees with the checkpoint (element count, entry point or size)"
        except (KeyError, TypeError, ValueError, OSError, struct.error) as exc:
            return f"malformed checkpoint ({exc!r})"
        return None
