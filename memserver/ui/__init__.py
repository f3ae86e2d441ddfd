"""The memory browser (docs/ui.md): server-rendered pages over the storage contract, for `memserver ui` and
`memserver serve --http --ui`. Knows the contract, the loader's `Stores` and forget_matching's rules
(features/forgetting.py), never an engine or a transport."""
