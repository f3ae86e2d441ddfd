"""The journal: checksummed lines, the torn-tail policy, mid-file damage, the cross-process lock."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from memserver.errors import CorruptJournalError, StoreLockedError
from memserver.local.journal import FileLock, Journal, decode_line, encode_line
from tests.support.file_layers import FailingFiles, RecordingFiles


def _journal(tmp_path: Path, n: int) -> tuple[Path, list[int]]:
    path = tmp_path / "journal.jsonl"
    Journal.create(path, {"generation": "g1", "dim": 4, "model": "m"})
    j = Journal(path)
    ends = [j.append([{"op": "add", "id": f"{i:032x}", "content": f"memory {i} ü\n", "row": i}]) for i in range(n)]
    j.close()
    return path, ends


def _read_all(j: Journal) -> tuple[list[dict], int, int]:
    entries, offset = [], j.header_end
    while True:
        r = j.read(offset, limit=64)  # a tiny chunk size exercises the chunk boundaries too
        entries += [rec for _, rec in r.entries]
        offset = r.end
        if r.done:
            return entries, offset, r.size


def test_line_round_trip_and_crc_detects_damage() -> None:
    """A line decodes to its record; any flipped byte makes it undecodable."""
    rec = {"op": "add", "content": 'quote " newline \n tab \t ☃', "tags": ["a"]}
    line = encode_line(rec)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert decode_line(line[:-1]) == rec
    for i in range(len(line) - 1):
        damaged = bytearray(line[:-1])
        damaged[i] ^= 0x01
        assert decode_line(bytes(damaged)) is None


def test_torn_last_line_at_every_byte_keeps_earlier_records(tmp_path: Path) -> None:
    """Cutting the last line anywhere keeps every earlier record, and the repair sets the torn bytes aside."""
    path, ends = _journal(tmp_path, 3)
    full = path.read_bytes()
    for cut in range(ends[1] + 1, ends[2]):
        path.write_bytes(full[:cut])
        j = Journal(path)
        entries, end, size = _read_all(j)
        assert [e["row"] for e in entries] == [0, 1]
        assert end == ends[1] and size == cut
        aside = j.set_aside_tail(end)
        assert aside is not None and aside.read_bytes() == full[ends[1] : cut]
        assert path.read_bytes() == full[: ends[1]]
        j.close()
        aside.unlink()


def test_garbled_last_line_is_a_torn_tail(tmp_path: Path) -> None:
    """A complete but garbled last line (e.g. zeros after power loss) is treated as torn, not as corruption."""
    path, ends = _journal(tmp_path, 2)
    with open(path, "ab") as f:
        f.write(b"\x00" * 40 + b"\n" + b"\x00" * 10)
    j = Journal(path)
    entries, end, size = _read_all(j)
    assert len(entries) == 2 and end == ends[1] and size > end


def test_damage_in_the_middle_is_an_error(tmp_path: Path) -> None:
    """A bad line followed by good ones raises CorruptJournalError naming the byte offset."""
    path, ends = _journal(tmp_path, 3)
    data = bytearray(path.read_bytes())
    data[ends[0] + 5] ^= 0xFF  # inside the second record
    path.write_bytes(bytes(data))
    j = Journal(path)
    with pytest.raises(CorruptJournalError, match=f"byte {ends[0]}"):
        _read_all(j)


def _with_batch(tmp_path: Path, then_single: bool) -> tuple[Path, int, list[int]]:
    """A journal of one line, a batch of three ~2 kB lines (one append, one sync), maybe one more single line.

    Returns the path, the batch's start offset and the offsets where its lines end."""
    path, ends = _journal(tmp_path, 1)
    j = Journal(path)
    j.append([{"op": "add", "id": f"b{k}", "content": "x" * 2000} for k in range(3)])
    if then_single:
        j.append([{"op": "del", "id": "b0"}])
    j.close()
    data = path.read_bytes()
    line_ends = [data.index(b"\n", data.index(f'"id":"b{k}"'.encode())) + 1 for k in range(3)]
    return path, ends[0], line_ends


def test_a_batch_whose_first_page_was_lost_is_a_torn_tail(tmp_path: Path) -> None:
    """Power loss can keep a batch's later page and lose its first (zeros there): the good lines after the
    damage are the rest of that one batch, so the whole batch is set aside and every earlier record is kept."""
    path, start, _ = _with_batch(tmp_path, then_single=False)
    data = bytearray(path.read_bytes())
    data[start : start + 100] = bytes(100)  # the first line's start never reached the disk
    path.write_bytes(bytes(data))
    j = Journal(path)
    entries, end, size = _read_all(j)
    assert [e["id"] for e in entries] == [f"{0:032x}"] and end == start and size == len(data)
    aside = j.set_aside_tail(end)
    assert aside is not None and aside.read_bytes() == bytes(data[start:])
    assert _read_all(Journal(path))[0] == entries


def test_records_of_a_batch_read_back_without_their_batch_mark(tmp_path: Path) -> None:
    """Lines of a batch carry "batch":[k,n] on disk; the records read back are the ones appended."""
    path, _, _ = _with_batch(tmp_path, then_single=False)
    assert b'"batch":[2,3]' in path.read_bytes()
    entries, _, _ = _read_all(Journal(path))
    assert entries[1:] == [{"op": "add", "id": f"b{k}", "content": "x" * 2000} for k in range(3)]


@pytest.mark.parametrize("damaged_line", [0, 1])
def test_damage_inside_a_batch_with_a_later_append_is_an_error(tmp_path: Path, damaged_line: int) -> None:
    """A later append was synced after the batch, so damage in the batch was on disk already: refused."""
    path, start, line_ends = _with_batch(tmp_path, then_single=True)
    data = bytearray(path.read_bytes())
    at = start if damaged_line == 0 else line_ends[0]
    data[at + 10] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptJournalError, match=f"byte {at}"):
        _read_all(Journal(path))


def test_damage_before_a_whole_batch_is_an_error(tmp_path: Path) -> None:
    """Good lines after the damage that start a batch (line 1 of n) belong to a later append: refused."""
    path, _, _ = _with_batch(tmp_path, then_single=False)
    data = bytearray(path.read_bytes())
    header_end = data.index(b"\n") + 1
    data[header_end + 10] ^= 0xFF  # the single line before the batch
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptJournalError, match=f"byte {header_end}"):
        _read_all(Journal(path))


def test_bad_header_is_an_error(tmp_path: Path) -> None:
    """A journal whose first line is not a header is refused."""
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b"not a journal\n")
    with pytest.raises(CorruptJournalError):
        Journal(path)


@pytest.mark.parametrize(
    ("op", "error"), [("write", errno.ENOSPC), ("write", errno.EIO), ("fdatasync", errno.EIO)], ids=str
)
def test_failed_append_leaves_nothing_half_written(tmp_path: Path, op: str, error: int) -> None:
    """A write cut short by a full disk, or a failing sync: the error propagates, the bytes are cut off again,
    and the journal takes the next append as if nothing had happened."""
    path, ends = _journal(tmp_path, 1)
    files = FailingFiles(lambda o, name: o == op, error)
    j = Journal(path, files=files)
    with pytest.raises(OSError) as raised:
        j.append([{"op": "add", "id": "x", "content": "lost " * 100}])
    assert raised.value.errno == error and files.failures == 1
    assert os.path.getsize(path) == ends[0]
    assert files.calls[-2:] == [("ftruncate", "journal.jsonl"), ("fsync", "journal.jsonl")]
    files.armed = False
    end = j.append([{"op": "add", "id": "y", "row": 1}])
    j.close()
    entries, offset, size = _read_all(Journal(path))
    assert [e["id"] for e in entries] == [f"{0:032x}", "y"] and offset == size == end


def test_append_syncs_once_per_batch(tmp_path: Path) -> None:
    """A batch of lines is written, then fdatasync()ed once (group commit), and nothing else is touched."""
    path, _ = _journal(tmp_path, 1)
    files = RecordingFiles()
    j = Journal(path, files=files)
    j.append([{"op": "add", "id": str(i)} for i in range(50)])
    j.close()
    assert files.calls == [
        ("open", "journal.jsonl"),
        ("write", "journal.jsonl"),
        ("fdatasync", "journal.jsonl"),
        ("close", "journal.jsonl"),
    ]


def test_setting_aside_a_torn_tail_makes_the_copy_durable_before_truncating(tmp_path: Path) -> None:
    """The torn bytes are written to their own file and synced, the folder synced, then the journal cut."""
    path, ends = _journal(tmp_path, 2)
    with open(path, "ab") as f:
        f.write(b'{"op":"add","id":"half')
    files = RecordingFiles()
    j = Journal(path, files=files)
    assert j.set_aside_tail(ends[1]) is not None
    j.close()
    ops = [op for op, _ in files.calls]
    assert ops == ["open", "create", "write", "fsync", "close", "fsync_dir", "ftruncate", "fsync", "close"]


def test_lock_excludes_writers_and_times_out(tmp_path: Path) -> None:
    """An exclusive hold in one open file blocks another (as another process would be) until the timeout."""
    a = FileLock(tmp_path / "lock", timeout=0.2)
    b = FileLock(tmp_path / "lock", timeout=0.2)
    with a.hold(exclusive=True), pytest.raises(StoreLockedError), b.hold(exclusive=False):
        pass
    with a.hold(exclusive=False), b.hold(exclusive=False):  # shared holds coexist
        pass
