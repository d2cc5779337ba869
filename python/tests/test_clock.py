"""The clock is called as Python calls it, whatever shape it has: a class
instance with ``__call__`` (read through a kept function while the class is
unchanged), that class patched later, a static ``__call__``, a builtin."""

import time

import duplex_session as d


class Counter:
    def __init__(self) -> None:
        self.t = 1.0

    def __call__(self) -> float:
        return self.t


def last(clock) -> float:
    m = d.DuplexSessionRuntimeManager(clock=clock)
    f = d.DuplexFence("s")
    s = m.open_session(f)
    s.touch(f, d.DuplexLeaseActivity.HEARTBEAT)
    return s.lease.last_activity


def test_instance_with_call():
    c = Counter()
    m = d.DuplexSessionRuntimeManager(clock=c)
    f = d.DuplexFence("s")
    s = m.open_session(f)
    c.t = 2.5
    s.touch(f, d.DuplexLeaseActivity.HEARTBEAT)
    assert s.lease.last_activity == 2.5


def test_a_class_patched_after_the_manager_is_made_is_seen():
    class Patched(Counter):
        pass

    c = Patched()
    m = d.DuplexSessionRuntimeManager(clock=c)
    f = d.DuplexFence("s")
    s = m.open_session(f)
    Patched.__call__ = lambda self: 9.0
    s.touch(f, d.DuplexLeaseActivity.HEARTBEAT)
    assert s.lease.last_activity == 9.0
    Counter.__call__, saved = (lambda self: 4.0), Counter.__call__
    try:
        del Patched.__call__
        s.touch(f, d.DuplexLeaseActivity.HEARTBEAT)
        assert s.lease.last_activity == 4.0
    finally:
        Counter.__call__ = saved


def test_other_shapes():
    class Static:
        __call__ = staticmethod(lambda: 7.0)

    assert last(Static()) == 7.0
    assert last(lambda: 3.0) == 3.0
    assert abs(last(time.monotonic) - time.monotonic()) < 60
