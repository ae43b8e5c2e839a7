"""libcst codemods that patch vLLM-Omni's shared files at their semantic anchors (never marker strings)."""
