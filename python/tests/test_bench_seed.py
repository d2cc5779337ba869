"""Where ``python -m duplex_session.bench`` finds the seed."""

import os

import pytest

from duplex_session import bench


def plant(root):
    module = root / "shared" / "reference" / bench.SEED_MODULE
    module.parent.mkdir(parents=True)
    module.write_text("")
    return str(root / "shared" / "reference")


def test_found_beside_any_parent(tmp_path, monkeypatch):
    reference = plant(tmp_path)
    deep = tmp_path / "checkout" / "python" / "tests"
    deep.mkdir(parents=True)
    monkeypatch.delenv("DUPLEX_SEED_PATH", raising=False)
    monkeypatch.chdir(deep)
    assert bench.find_seed(None) == os.path.abspath(reference)


def test_the_environment_and_the_flag_come_first(tmp_path, monkeypatch):
    reference = plant(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DUPLEX_SEED_PATH", str(tmp_path / "nowhere"))
    with pytest.raises(SystemExit, match="--seed-path DIR or DUPLEX_SEED_PATH"):
        bench.find_seed(None)
    assert bench.find_seed(reference) == os.path.abspath(reference)


def test_a_missing_seed_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.delenv("DUPLEX_SEED_PATH", raising=False)
    monkeypatch.chdir(tmp_path)
    # Only what this test made exists: a seed beside a folder above the
    # temporary one (a checkout's shared/ next to /tmp) must not count.
    isfile = os.path.isfile
    monkeypatch.setattr(os.path, "isfile", lambda p: str(p).startswith(str(tmp_path)) and isfile(p))
    with pytest.raises(SystemExit, match="duplex_session.py under"):
        bench.find_seed(None)
