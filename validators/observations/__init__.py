"""Typed observations: what a backend (harness, offline engine, server, URL) saw, and nothing it concluded.

Verdicts (``omnitts.validators.verdicts``) judge them; :mod:`.schema` carries them across process boundaries.
"""
