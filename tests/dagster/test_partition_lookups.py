"""`cached_partition_lookups` (rivet_dagster/partition_lookups.py) on a real Dagster instance:
inside the block each distinct dynamic-partition lookup reaches the storage once; after it the
instance answers from its storage again and carries no trace of the cache."""

# No `from __future__ import annotations`: Dagster reads the assets' `context` and return
# annotations when it defines them, and refuses string ones.

import dagster as dg

from rivet_dagster.partition_lookups import CACHED_METHODS, cached_partition_lookups


def test_lookups_are_answered_once_inside_the_block_and_live_after_it(tmp_path):
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        instance.add_dynamic_partitions("items_chunks", ["w1", "w2"])
        storage = instance.event_log_storage
        calls: list[str] = []
        original = type(storage).has_dynamic_partition

        def counted(self, *args, **kwargs):  # the storage's own answer, counted
            calls.append("has")
            return original(self, *args, **kwargs)

        type(storage).has_dynamic_partition = counted
        try:
            with cached_partition_lookups(instance):
                for _ in range(5):
                    assert instance.has_dynamic_partition("items_chunks", "w1") is True
                    assert instance.has_dynamic_partition("items_chunks", "w9") is False
                assert instance.get_dynamic_partitions("items_chunks") == ["w1", "w2"]
                instance.add_dynamic_partitions("items_chunks", ["w9"])
                # within the block the first answers stand (the step's own range cannot change)
                assert instance.has_dynamic_partition("items_chunks", "w9") is False
            assert calls == ["has", "has"]  # two distinct questions, each asked once
            assert not any(name in vars(instance) for name in CACHED_METHODS)  # restored
            assert instance.has_dynamic_partition("items_chunks", "w9") is True  # live again
            assert instance.get_dynamic_partitions("items_chunks") == ["w1", "w2", "w9"]
        finally:
            type(storage).has_dynamic_partition = original


def test_a_ranged_step_adds_each_windows_metadata_with_one_range_check(tmp_path):
    """Dagster's own `add_asset_metadata` range check, inside the block, for a step over three
    dynamic partitions: every window's metadata lands on its own partition's materialization,
    and the instance is asked about the range once, not once per window."""
    chunks = dg.DynamicPartitionsDefinition(name="items_chunks")
    asked: list[str] = []

    @dg.asset(partitions_def=chunks)
    def items(context: dg.AssetExecutionContext) -> None:
        with cached_partition_lookups(context.instance):
            for key in context.partition_keys:
                context.add_asset_metadata({"window": key}, partition_key=key)

    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        instance.add_dynamic_partitions("items_chunks", ["w1", "w2", "w3"])
        storage = type(instance.event_log_storage)
        original = storage.get_dynamic_partitions

        def counted(self, *args, **kwargs):  # the storage's own answer, counted
            asked.append("keys")
            return original(self, *args, **kwargs)

        storage.get_dynamic_partitions = counted
        try:
            result = dg.materialize([items], instance=instance, tags={
                "dagster/asset_partition_range_start": "w1", "dagster/asset_partition_range_end": "w3"})
        finally:
            storage.get_dynamic_partitions = original
        assert result.success
        by_partition = {m.partition: m.metadata["window"].value
                        for m in result.asset_materializations_for_node("items")}
        assert by_partition == {"w1": "w1", "w2": "w2", "w3": "w3"}
        inside = len(asked)
        assert inside >= 1
        # without the block, Dagster asks again for every window (what the cache removes)
        asked.clear()

        @dg.asset(partitions_def=chunks, name="items")
        def uncached(context: dg.AssetExecutionContext) -> None:
            for key in context.partition_keys:
                context.add_asset_metadata({"window": key}, partition_key=key)

        storage.get_dynamic_partitions = counted
        try:
            assert dg.materialize([uncached], instance=instance, tags={
                "dagster/asset_partition_range_start": "w1", "dagster/asset_partition_range_end": "w3"}).success
        finally:
            storage.get_dynamic_partitions = original
        assert len(asked) >= inside + 2  # one more per extra window
