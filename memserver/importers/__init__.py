"""Importers: other tools' exports read into memserver's import records (`memserver import --from FORMAT PATH`).

One module per format (claude.py, chatgpt.py, mcp_graph.py, markdown.py), each a reader that turns a file or folder
into `entries.Entry` values: a record to store, a message skipped on purpose (and why), or a part that is
malformed (and where). `run.py` collects them all first (so a malformed file imports nothing unless the caller
keeps going), gives each record a stable id and source, and stores them through the storage contract's `import_`,
with a progress bar on a terminal and a summary at the end. This layer knows the contract, never an engine.
"""
