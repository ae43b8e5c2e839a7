"""Reference TTS models: standalone renders of the pattern templates, their HF-style references, mutants, goldens.

``catalog.list_models()`` names every subject (correct models, then ``<model>@<bug>`` mutants) and
``catalog.get_subject(name)`` returns what a validator needs to run one. See docs/reference_models.md.
"""
