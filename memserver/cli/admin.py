"""The commands that look after the model and the stores: model, embed, stats, export, import, compact, db.

Heavy modules are imported inside each command, so `memserver --help` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator
from typing import Any

from memserver.cli.options import database_url, open_store
from memserver.errors import MemserverError


def cmd_model(args: argparse.Namespace) -> int:
    """memserver model fetch | verify | info."""
    import json
    from pathlib import Path

    from memserver.embedding import sources
    from memserver.embedding.embedder import Embedder

    embedder = Embedder(args.model_dir).load()  # resolves, caches, and checks the model's interface
    files = embedder.files
    assert files is not None
    if args.action == "fetch":
        for reason in files.tried:
            print(f"memserver: passed over: {reason}", file=sys.stderr)
        print(f"{sources.MODEL_ID}: {files.detail}")
        print(f"  model.onnx      {files.model}")
        print(f"  tokenizer.json  {files.tokenizer}")
        return 0
    if args.action == "info":
        info = {
            "model_id": sources.MODEL_ID,
            "source": files.source,
            "detail": files.detail,
            "dir": str(files.directory),
            "files": {
                path.name: {"path": str(path), "bytes": path.stat().st_size, "sha256": sources.sha256_file(path)}
                for path in (files.model, files.tokenizer)
            },
            "graph": describe_graph(embedder.graph),
            "dim": embedder.dim,
            "max_seq_length": embedder.max_seq_length,
            "hub_revision": sources.HUB_REVISION,
            "threads": embedder.threads,
            "query_cache_entries": embedder.query_cache.max_entries,
        }
        print(json.dumps(info, indent=2))
        return 0
    # verify: the reference texts against sentence-transformers' vectors (embedding/reference.py; doctor too)
    from memserver.embedding import reference

    path = args.reference or f"the packaged {reference.REFERENCE_DATA}"
    try:
        items = reference.reference_items(Path(args.reference) if args.reference else None)
    except (OSError, ValueError, KeyError) as exc:
        raise MemserverError(f"cannot read the reference embeddings {path}: {exc}; pass --reference FILE") from exc
    result = reference.check(embedder, items)
    ok = bool(result["ok"])
    print(
        f"{'ok' if ok else 'FAILED'}: min cosine {result['min_cosine']:.8f} (text {result['worst']}), mean "
        f"{result['mean_cosine']:.10f} over {result['texts']} reference texts; threshold {result['threshold']}; "
        f"model {files.model}"
    )
    return 0 if ok else 1


def describe_graph(metadata: dict[str, str]) -> dict[str, object]:
    """What `model info` says about the ONNX graph in use, from the metadata memserver.embedding.onnx_export stamps."""
    from memserver.embedding.onnx_export import FUSED_OPS, GRAPH_KEY, GRAPH_VERSION, VERSION_KEY

    if VERSION_KEY not in metadata:
        return {
            "name": "unstamped",
            "version": None,
            "note": "not stamped by memserver.onnx_export: the Hub's onnx/model.onnx, or graph version 1 converted "
            "before the stamp existed; standard operators, which onnxruntime optimises on load",
        }
    name = metadata.get(GRAPH_KEY, "")
    return {
        "name": name,
        "version": int(metadata[VERSION_KEY]),
        "current_version": GRAPH_VERSION,
        "fused_ops": [f"com.microsoft.{op}" for op in FUSED_OPS] if name == "fused" else [],
    }


def cmd_embed(args: argparse.Namespace) -> int:
    """memserver embed TEXT...: print each text's word pieces and embedding as JSON."""
    import json

    from memserver.embedding.embedder import Embedder

    embedder = Embedder(args.model_dir)
    vectors = embedder.embed(args.texts)
    items = [
        {"text": text, "tokens": embedder.tokenize(text), "embedding": vector.tolist()}
        for text, vector in zip(args.texts, vectors, strict=True)
    ]
    print(json.dumps({"model": embedder.model_name, "dim": embedder.dim, "items": items}, ensure_ascii=False))
    return 0


def cmd_db(args: argparse.Namespace) -> int:
    """memserver db migrate: create or upgrade memserver's schema in a PostgreSQL database; db stats: its figures."""
    import logging

    from memserver.engines import database_stats, migrate_database
    from memserver.errors import ConfigError

    url = database_url(args)
    if not url:
        raise ConfigError(f"memserver db {args.action} needs --database URL (or MEMSERVER_DATABASE_URL)")
    if args.action == "stats":
        import json

        print(json.dumps(database_stats(url), indent=2, ensure_ascii=False))
        return 0
    # A re-index of the keyword terms (postgres/analyzer.py) logs its progress: show it on stderr.
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="memserver %(levelname)s %(name)s: %(message)s")
    applied, version = migrate_database(url)
    print(f"schema version {version}" + (f" ({applied} migration(s) applied)" if applied else " (already current)"))
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """Print the collection's figures as an aligned table (nested ones as `index.M`), or JSON with --json."""
    import json

    with open_store(args) as store:
        stats = store.stats()
    if args.json:
        print(json.dumps(stats, indent=2, ensure_ascii=False))
        return 0
    from memserver.cli.tables import aligned

    print(aligned([[name, _figure(value)] for name, value in _flat(stats)]))
    return 0


def _flat(stats: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for name, value in stats.items():
        if isinstance(value, dict):
            yield from _flat(value, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", value


def _figure(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value).lower() if value is not None else "-"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.4g}"
    return str(value)


def cmd_export(args: argparse.Namespace) -> int:
    """Write every memory as one JSON line, oldest first (to stdout or --output)."""
    import json

    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout  # noqa: SIM115
    count = 0
    try:
        with open_store(args) as store:
            for record in store.export(include_vectors=args.vectors):
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
                count += 1
    finally:
        if out is not sys.stdout:
            out.close()
    print(f"exported {count} memories", file=sys.stderr)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """Add the memories of a JSON-lines export; known ids and duplicate content are skipped. With --from, another
    tool's export (cli/care.py)."""
    import json

    if getattr(args, "from_format", None):
        from memserver.cli.care import cmd_import_from

        return cmd_import_from(args)

    from memserver.errors import InvalidInputError

    def records(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
        """Parse lazily, with progress on stderr: an import of 100k memories takes a while."""
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidInputError(f"line {number} of the import is not JSON: {exc.msg}") from None
            if number % 1000 == 0:
                print(f"\rread {number} records ...", end="", file=sys.stderr, flush=True)

    source = sys.stdin if args.file == "-" else open(args.file, encoding="utf-8")  # noqa: SIM115
    try:
        with open_store(args) as store:
            added = store.import_(records(source))
    finally:
        if source is not sys.stdin:
            source.close()
    print(f"\rimported {added} new memories", file=sys.stderr)
    return 0


def cmd_compact(args: argparse.Namespace) -> int:
    """Rewrite the journal without deleted memories and rebuild the index."""
    import json

    with open_store(args) as store:
        print(json.dumps(store.compact(), indent=2))
    return 0
