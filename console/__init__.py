"""What every omnitts console script shares (``omnitts-scaffold``, ``omnitts-lint``, ``omnitts-validate``,
``omnitts-probe``, ``omnitts-engine-env``): command-line manners. At the bottom of the layers with ``knowledge``:
it imports no other omnitts package."""
