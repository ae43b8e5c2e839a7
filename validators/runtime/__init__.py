"""The harness side: the model context, the runner harness, subjects and their loaders, per-release
consolidation, the sync spy, state discovery, audio and checklist output."""
