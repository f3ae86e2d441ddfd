"""Closed research, kept runnable but not kept current: see README.md here."""
