"""The measuring tools: run each as a module from the repository root, `uv run python -m benchmarks.<name>`."""
