"""Backends observe; verdicts judge. One backend per way of running a model: the harness (``harness.py``), the tree's
own offline engine (``offline.py``), its server (``server.py``), and any running server by URL (``url.py``)."""
