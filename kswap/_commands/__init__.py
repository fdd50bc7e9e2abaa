"""The subcommands of the ``kswap`` command, one module per group.

``kswap.cli`` parses the arguments and calls the function that runs the
subcommand; each module here holds that function and its helpers:

- ``profile``: ``kswap profile`` and ``kswap measure``, a few training steps of a
  named model measured, and the tables of bytes and op time per layer;
- ``pack``: ``kswap pack`` and the packing report ``kswap profile --pack`` prints;
- ``plan``: ``kswap plan``, a static plan from the model's shapes;
- ``demo``: ``kswap demo``.

Every TensorFlow and Keras import is inside the function that needs it, so that
``kswap --help``, argument errors and ``kswap pack`` run without TensorFlow.
"""

__all__: list[str] = []
