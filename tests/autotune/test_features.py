"""Features of candidates for the cost model: caches that do not outlive their inputs."""

from __future__ import annotations


def test_knob_tables_are_cached_only_while_their_space_lives() -> None:
    import gc

    from autotune import features
    from autotune.task import Task

    space = Task("matmul.x86", [((32, 32), "float32"), ((32, 32), "float32")]).config_space()
    assert features.knob_tables(space) is features.knob_tables(space)
    n = len(features._TABLES)
    del space
    gc.collect()
    assert len(features._TABLES) == n - 1
