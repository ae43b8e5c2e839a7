"""The runtime checks that ``pytest validators --model NAME`` collects (one module per invariant/phase)."""
