"""The runtime checks that ``pytest validators --model NAME`` collects: one test per check id, on the tier's
backend."""
