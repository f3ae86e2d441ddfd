"""The metadata snapshot `meta-<generation>.snap`: the catalog and the vector CRCs as of a journal offset.

Opening a store restores it instead of re-decoding the whole journal up to that offset (1M memories: ~3 s instead
of ~10 s). It is derived data, written at each checkpoint after the index checkpoints (`save`, atomically:
magic, a JSON stamp, the payload, with its length and CRC-32), and trusted only if its stamp matches: this
generation, this Python (marshal's format), SNAPSHOT_FORMAT, an offset no later than the oldest loaded index
checkpoint, and the CRC of the journal line ending at that offset. Anything else is replayed over, never trusted.

Payload, format 6 (marshal: fast, and loading it runs no code): a tuple of the format, the row count n, then
buffers by row, written by marshal as bytes without a copy: ids, the id keys and their rows, the texts with each
row's start and end, created_at; tags and sources as lists by row (equal tuples and sources are one object, so
marshal writes each once); the current rows in (occurred_at, row) order, the vector CRCs, the content keys and
their rows, and the rows of each tag and source (names, counts, concatenated rows). Format 5 appends occurred_at
(a buffer by row), the four label columns (speaker, role, session, namespace: each its names, its codes by row
and the row sets of its values) and the history (replace links and tombstones, history.py). Format 6 appends the
lifecycle states (kind, due, done, pinned, archived: issue 24) as one more label column.

Formats 4 and 5 are decoded too. A format-4 snapshot (written before the conversation fields) holds no field, so
occurred_at is created_at and every label its default, and its rows are all current; a format-5 one (before the
lifecycle states) holds none of those, so every memory is a note. The next checkpoint writes format 6.
"""

from __future__ import annotations

import json
import logging
import marshal
import os
import sys
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from memserver.durable import OS, FileLayer, atomic_write, write_new_file
from memserver.local import columns
from memserver.local.catalog import DEFAULT_NAMESPACE, Catalog
from memserver.local.history import History
from memserver.local.time_order import TimeOrder

log = logging.getLogger(__name__)

SNAPSHOT_FORMAT = 6  # written; READABLE formats are decoded, any other is replayed over
READABLE = (4, 5, 6)  # 6: + the lifecycle states (issue 24)
_MAGIC = b"memserver-meta-snapshot\n"


def snapshot_path(folder: Path, generation: str) -> Path:
    return folder / f"meta-{generation}.snap"


def line_crc(path: Path, offset: int, identity: tuple[int, int] | None = None) -> str:
    """The CRC hex of the journal line ending at `offset` in the file at `path` ("" if there is none, or if the
    file is no longer the one `identity` (st_dev, st_ino) names): what ties a snapshot to its journal."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return ""
    try:
        st = os.fstat(fd)
        if (identity is not None and (st.st_dev, st.st_ino) != identity) or not 11 <= offset <= st.st_size:
            return ""
        tail = os.pread(fd, 11, offset - 11)
    finally:
        os.close(fd)
    return tail[:8].decode("ascii", "replace") if tail.endswith(b'"}\n') else ""


def stamp_for(generation: str, offset: int, count: int, crc: str) -> dict[str, Any]:
    """The stamp of a snapshot: the index checkpoints' stamp plus what ties it to this journal and this Python."""
    return {
        "generation": generation,
        "offset": offset,
        "count": count,
        "line_crc": crc,
        "python": list(sys.version_info[:2]),
        "format": SNAPSHOT_FORMAT,
    }


def encode(catalog: Catalog, crcs: np.ndarray) -> bytes:
    """The payload of `catalog` and the vector CRCs by row (format SNAPSHOT_FORMAT, see the module docstring)."""
    n = catalog.next_row
    alive = catalog.alive[:n]
    vcrc = np.full(n, -1, dtype=np.int64)
    vcrc[: min(n, len(crcs))] = crcs[:n]
    parts: tuple[Any, ...] = (  # marshal writes any buffer (the numpy columns) as bytes, without a copy here
        SNAPSHOT_FORMAT,
        n,
        *catalog.ids.payload(n),
        *catalog.contents.payload(n),
        catalog.created.payload(n),
        catalog.tags[:n],
        catalog.sources[:n],
        np.asarray(catalog.times.rows, dtype=np.int64),
        vcrc,
        *catalog.content_keys.payload(alive),
        *catalog.tag_rows.payload(alive),
        *catalog.source_rows.payload(alive),
        catalog.occurred.payload(n),
        *(labels.payload(n, alive) for labels in catalog.labels()),
        catalog.history.payload(),
        catalog.states.payload(n, alive),
    )
    return marshal.dumps(parts)


def decode(parts: tuple[Any, ...], count: object) -> tuple[Catalog, np.ndarray]:
    """(catalog, vector CRCs by row) from an unmarshalled payload holding `count` current memories. Raises
    ValueError, TypeError or IndexError when the parts do not fit together."""
    fmt, n, ids_b, id_h, id_r, texts, starts, ends, created_b, tags, sources, order_b, vcrc_b = parts[:13]
    key_h, key_r, tag_names, tag_counts, tag_flat, src_names, src_counts, src_flat = parts[13:21]
    if fmt not in READABLE or len(parts) != {4: 21, 5: 27}.get(fmt, 28):
        raise ValueError(f"format {fmt!r}")
    if not isinstance(n, int) or not all(isinstance(col, list) and len(col) == n for col in (tags, sources)):
        raise ValueError("columns do not match the row count")
    c = Catalog()
    c.ids = columns.IdMap.from_payload(ids_b, id_h, id_r, n)
    stored = c.ids.ids.occupied(n)
    c.contents = columns.TextHeap.from_payload(texts, starts, ends, n)
    c.created = columns.FixedText.from_payload(32, created_b, n)
    c.states.codes = np.zeros(n, dtype=np.int32)
    if fmt == 4:
        occurred = columns.FixedText.from_payload(32, created_b, n)
        for labels in c.labels():
            labels.codes = np.zeros(n, dtype=np.int32)
    else:
        occurred_b, speakers, roles, sessions, spaces, history = parts[21:27]
        if fmt >= 6:
            c.states = columns.Labels.from_payload("", parts[27], n)
        occurred = columns.FixedText.from_payload(32, occurred_b, n)
        c.speakers = columns.Labels.from_payload("", speakers, n)
        c.roles = columns.Labels.from_payload("", roles, n)
        c.sessions = columns.Labels.from_payload("", sessions, n)
        c.namespaces = columns.Labels.from_payload(DEFAULT_NAMESPACE, spaces, n)
        c.history = History.from_payload(history, n)
    if any(stored[row] for row in c.history.forgotten) or not all(stored[row] for row in c.history.replaced_rows()):
        raise ValueError("history does not match the stored rows")
    alive = stored.copy()
    alive[list(c.history.replaced)] = False
    live = int(alive.sum())
    if live != count:
        raise ValueError("record count mismatch")
    order = np.frombuffer(order_b, np.int64)
    if len(order) != live or (live and not (0 <= int(order.min()) <= int(order.max()) < n)):
        raise ValueError("time order does not match the records")
    if not alive[order].all():
        raise ValueError("time order names a row that is not current")
    vcrc = np.frombuffer(vcrc_b, np.int64).copy()
    if len(vcrc) != n:
        raise ValueError("vector CRCs do not match the row count")
    c.content_keys = columns.HashIndex.from_payload(key_h, key_r, n)
    if len(c.content_keys) != live:
        raise ValueError("content keys do not match the records")
    c.tag_rows = columns.RowSets.from_payload(tag_names, tag_counts, tag_flat, n)
    c.source_rows = columns.RowSets.from_payload(src_names, src_counts, src_flat, n)
    c.tags, c.sources, c.alive, c.next_row, c.live = tags, sources, alive, n, live
    c.times = TimeOrder(occurred, order.tolist())
    c.plain = all(len(labels.names) == 1 for labels in (*c.labels(), c.states)) and not (
        c.history.replaces or c.history.replaced
    )
    spaces_of = np.bincount(c.namespaces.codes[:n][alive], minlength=len(c.namespaces.names))
    c.per_namespace = {c.namespaces.names[code]: int(k) for code, k in enumerate(spaces_of.tolist()) if k}
    return c, vcrc


# --- the file --------------------------------------------------------------------------------------------------


def save(path: Path, stamp: dict[str, Any], payload: bytes, files: FileLayer = OS) -> None:
    """Write the snapshot file atomically (a crash leaves the old one or the new one): magic, one JSON line
    (`stamp` + payload length and CRC-32), payload."""
    atomic_write(path, *_file_chunks(stamp, payload), files=files)


def write_new(path: Path, stamp: dict[str, Any], payload: bytes, files: FileLayer = OS) -> None:
    """The snapshot file as a new file at `path`, synced (checkpoint_job.py renames it into place later)."""
    write_new_file(path, *_file_chunks(stamp, payload), files=files)


def _file_chunks(stamp: dict[str, Any], payload: bytes) -> tuple[bytes, bytes]:
    head = {**stamp, "payload_bytes": len(payload), "payload_crc32": zlib.crc32(payload)}
    # The payload goes as its own chunk: no copy of a large payload.
    return _MAGIC + json.dumps(head).encode() + b"\n", payload


def read_file(path: Path) -> tuple[dict[str, Any], memoryview] | None:
    """(stamp, payload) of a snapshot file whose length and CRC-32 check out; None if absent or damaged (logged).

    The payload is a view into the file's bytes, not a copy (a 1M-memory snapshot is ~0.3 GB)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("snapshot %s is unreadable (%s); replaying the journal instead", path, exc)
        return None
    nl = data.find(b"\n", len(_MAGIC))
    try:
        if not data.startswith(_MAGIC) or nl < 0:
            raise ValueError("bad magic")
        head = json.loads(data[len(_MAGIC) : nl])
        payload = memoryview(data)[nl + 1 :]
        if len(payload) != head["payload_bytes"] or zlib.crc32(payload) != head["payload_crc32"]:
            raise ValueError("length or CRC-32 mismatch")
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("snapshot %s is damaged (%s); replaying the journal instead", path, exc)
        return None
    return head, payload


def load(
    path: Path, generation: str, journal: Path, identity: tuple[int, int], lowest: int, floor: int
) -> tuple[Catalog, np.ndarray, int] | None:
    """(catalog, CRCs, offset) from the snapshot at `path` if it is usable for this journal (`journal`, the file
    `identity` names, of `generation`) and covers an offset in [lowest, floor]; else None (the caller replays)."""
    got = read_file(path)
    if got is None:
        return None
    stamp, payload = got
    del got
    offset = stamp.get("offset")
    fmt = stamp.get("format")
    if isinstance(fmt, int) and fmt > SNAPSHOT_FORMAT:  # a later memserver's: said once, rewritten on close
        log.warning(
            "metadata snapshot %s was written by a newer memserver (format %d); replaying the journal instead",
            path,
            fmt,
        )
        return None
    if (
        stamp.get("generation") != generation
        or stamp.get("python") != list(sys.version_info[:2])
        or stamp.get("format") not in READABLE
        or not isinstance(offset, int)
        or not lowest <= offset <= floor
        or not stamp.get("line_crc")
        or line_crc(journal, offset, identity) != stamp["line_crc"]
    ):
        log.info("metadata snapshot %s is stale or does not match the journal; replaying it", path)
        return None
    try:
        parts = marshal.loads(payload)
        del payload  # the columns are copies: let the snapshot's bytes go before they are made
        catalog, crcs = decode(parts, stamp.get("count"))
    except (ValueError, TypeError, EOFError, IndexError) as exc:
        log.warning("metadata snapshot %s is unusable (%s); replaying the journal", path, exc)
        return None
    return catalog, crcs, offset
