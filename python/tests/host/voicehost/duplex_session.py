"""The engine's session runtime: the duplex_session package, bound to this
engine's own messages, lease and contracts modules."""

from duplex_session import bind_host

bind_host(globals())
