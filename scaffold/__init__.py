"""omnitts-scaffold: write a complete TTS model integration into a vLLM-Omni tree."""
