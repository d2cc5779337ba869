"""A voice engine's control plane, shaped as vllm-omni's duplex engine is: its
own value classes in ``messages``, ``lease`` and ``contracts``, and a
``duplex_session`` module that is the only file the session runtime touches.
The tests copy this package twice, once with ``duplex_session.py`` binding
the package and once with the seed module in its place."""
