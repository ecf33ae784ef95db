"""--gym-shard: the assignment rule (sessions that run one shard against the stand-in ``gym``:
tests/plugin/test_shard.py; tests/real_gym/test_scale_real_gym.py runs shards against real Gym)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from pytest_gym_eval.tasks.shard import Shard, assign_shards, parse_shard


@pytest.mark.parametrize(("text", "shard"), [("1/3", Shard(1, 3)), (" 3 / 3 ", Shard(3, 3)), ("1/1", Shard(1, 1))])
def test_shards_are_numbered_from_one(text: str, shard: Shard) -> None:
    assert parse_shard(text) == shard
    assert str(shard) == text.replace(" ", "")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0/3", "numbered from 1"),
        ("4/3", "numbered from 1"),
        ("1/0", "at least 1"),
        ("2", "expected I/N"),
        ("a/b", "expected I/N"),
        ("-1/3", "expected I/N"),
    ],
)
def test_bad_shards_say_the_expected_form(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_shard(text)


@pytest.mark.parametrize(("tasks", "count"), [(12, 3), (5, 3), (2, 3), (1000, 7), (20000, 8), (1, 1)])
def test_shards_differ_by_at_most_one_task(tasks: int, count: int) -> None:
    assigned = assign_shards("datasets/d.jsonl", [f"task-{i}" for i in range(tasks)], count)
    sizes = Counter(assigned.values())
    assert set(assigned.values()) <= set(range(1, count + 1))
    full = [sizes.get(index, 0) for index in range(1, count + 1)]
    assert max(full) - min(full) <= 1 and sum(full) == tasks


def test_the_larger_shards_differ_between_datasets() -> None:
    # 13 tasks in 3 shards: one shard gets 5; which one depends on the dataset, so many datasets even out.
    larger = Counter()
    for number in range(60):
        sizes = Counter(assign_shards(f"data/{number}.jsonl", [f"t{i}" for i in range(13)], 3).values())
        larger[max(sizes, key=lambda shard: sizes[shard])] += 1
    assert set(larger) == {1, 2, 3} and min(larger.values()) >= 10


def test_assignment_ignores_row_order_and_duplicates() -> None:
    ids = [f"id-{i:04d}" for i in range(500)]
    shuffled = ids[:]
    random.Random(7).shuffle(shuffled)
    assert assign_shards("a.jsonl", ids, 4) == assign_shards("a.jsonl", shuffled + ids[:10], 4)


@pytest.mark.parametrize(("tasks", "count", "appended"), [(12, 3, 1), (1000, 8, 1), (1000, 8, 25), (5000, 5, 100)])
def test_appending_tasks_moves_at_most_count_minus_one_per_task(tasks: int, count: int, appended: int) -> None:
    rng = random.Random(tasks * count + appended)
    for _ in range(10):
        ids = [f"row-{rng.getrandbits(48):012x}" for _ in range(tasks + appended)]
        before = assign_shards("grow.jsonl", ids[:tasks], count)
        after = assign_shards("grow.jsonl", ids, count)
        moved = sum(1 for task in before if before[task] != after[task])
        assert moved <= (count - 1) * appended


def test_the_dataset_name_takes_part() -> None:
    ids = [f"t{i}" for i in range(300)]
    assert assign_shards("a.jsonl", ids, 3) != assign_shards("b.jsonl", ids, 3)
