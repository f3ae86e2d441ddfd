"""Harnesses that compare two checkouts of memserver (old vs new), each side in its own process."""
