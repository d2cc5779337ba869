"""What a session costs: memory that follows what it holds.

Measured as ``python -m duplex_session.bench`` measures it (tracemalloc for
Python's allocations, plus the extension's own count of what its sessions
hold in Rust). The ceilings are generous, well above today's figures and
below what reserving each session's worst case costs, so that only a return
to worst-case storage fails: about 2,800 bytes a session at the typical
load (the seed's module: about 6,900; worst-case inline storage: 48,800),
and about 43,600 with 256 completed appends (the seed's: 129,800; inline:
116,200).
"""

from duplex_session import bench


def test_a_typical_session_costs_what_it_holds():
    per_session = bench.bytes_per_session(bench.load_ours(), True, 1_000, full_window=False)
    assert 1_000 < per_session < 5_000


def test_a_full_window_costs_what_it_holds():
    per_session = bench.bytes_per_session(bench.load_ours(), True, 100, full_window=True)
    assert 20_000 < per_session < 90_000


def test_the_native_count_follows_the_contents():
    m = bench.load_ours().DuplexSessionRuntimeManager(clock=bench.Clock())
    f = bench.load_ours().DuplexFence("s" * 74)
    s = m.open_session(f)
    empty = s._native_bytes()
    for k in range(64):
        s.record_completed_append(f"op-{k:04d}", fence=f, mode=bench.load_ours().DuplexInputMode.APPEND_AUDIO_CHUNK, final=False, stage_results=[{"v": k}])
    grown = s._native_bytes()
    assert empty < 1_500 and grown > empty + 64 * 40
