"""Runtime validators: the runner harness, per-release consolidation, sync spy, audio and checklist output."""
