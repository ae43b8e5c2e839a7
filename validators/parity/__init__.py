"""Reference parity: does the integration compute what the model it ports computes (the guide's Phase 1).

* ``adapter``: the base class a contributor subclasses around their model's own implementation (imports nothing
  beyond the standard library: it runs inside the reference's own environment);
* ``capture_file``: the capture format (a versioned manifest plus arrays), read and written by both sides;
* ``capture``: runs an adapter over a request set and writes a capture (inside the reference's environment);
* ``refenv`` / ``cli``: the reference's cached environment and the ``omnitts-capture`` command;
* ``compare``: pure comparison functions over captured arrays (codes frame by frame, a top-k criterion for bf16,
  waveforms end to end, the decoder alone), with typed results.

docs/parity.md describes all of it. This package imports nothing heavy at import time.
"""
