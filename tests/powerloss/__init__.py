"""Power loss, simulated: record what a workload asks of the file system, then open every state a crash may leave.

SIGKILL proves the process side (the page cache survives the process). A power cut also loses what the kernel had
not written to the drive. `recorder.PowerLossFiles` is a durable.FileLayer that performs every call on the real
file system and logs it as an event (create, write/pwrite with offset and bytes, ftruncate, fsync/fdatasync,
rename, unlink, mkdir, directory sync); a file written by native code (hnswlib's graph, via durable.write_native)
is logged as one whole-file write holding its content at the moment it is synced. `crashes` replays the log up to
a crash point and draws a state the disk may hold after the power came back; the tests materialise it in a fresh
folder and open it with the real code.

The crash model (what "consistent with what was synced" means here)
------------------------------------------------------------------
Files (data and size):

* After fsync(fd) or fdatasync(fd) returns, the file's bytes and size are durable. fdatasync counts as fsync for
  both: POSIX defines it as synchronized I/O *data integrity* completion, which includes "all file system
  information required to retrieve the data" (XBD 3.384), and Linux's fdatasync(2) says "a change to the file size
  (st_size, as made by say ftruncate(2)), would require a metadata flush". What it may skip (timestamps) the store
  never reads. Neither call makes the file's *name* durable (fsync(2): "an explicit fsync() on a file descriptor for
  the directory is also needed").
* Between two syncs, the writes and truncates (the "pending" operations) may reach the disk in any part and order.
  A crash state draws one of: all pending lost; all kept; a prefix of them in order, the next one torn at an
  arbitrary byte; or page by page (4 KiB), each page touched since the sync holding its old or its new bytes
  independently, with the size any value the file had or anything between them. The page mix is what XFS (which
  writes the in-memory size at the completion of any I/O range) and ext4 with data=writeback can show, and what a
  drive that reorders its write cache shows on any file system; old bytes beyond the synced size read as zeros
  (unwritten extents). ext4's default data=ordered is stricter (no size past unwritten data); the model does not
  lean on it. Overwritten (pwrite) bytes not yet synced are old or new, per page.

Names (directory entries):

* A create, mkdir, rename or unlink is durable once its directory has been fsync()ed after it.
* Before that, the directory holds its durable entries plus a *prefix* of its pending operations, in order: ext4
  (jbd2) and XFS journal metadata and commit the journal in sequence, so a crash leaves the metadata operations up
  to some point (Pillai et al., "All File Systems Are Not Created Equal", OSDI 2014, table 1: no reordering of
  directory operations as atomic and persisted in order on ext4 and XFS; it found btrfs reordering them, which
  this model does not cover). Each directory draws its own prefix, which allows more states than one prefix over
  the whole file system. A rename is one atomic step: the new name names the old file or the new one, never
  nothing.
* ext4's auto_da_alloc (data flushed before a rename over an existing file) and its habit of committing a new
  file's entry with the file's fsync are not assumed.

Not modelled: damage to bytes that were synced (bit rot, a drive that acknowledges a flush it did not do, a file
system mounted with barriers off). Only those can make the store refuse to open: the journal then names the
damaged line's offset (CorruptJournalError), and tests/local/test_journal.py covers that refusal.
"""
