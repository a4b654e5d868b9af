"""A worker's call slots (runtime.admission.Slots) behave as asyncio's semaphore does: the same script of
acquires, releases and cancellations gives the same order of entries and the same count left, whichever
of the two runs it; and no more calls than slots are ever inside."""

from __future__ import annotations

import asyncio
import random

import pytest

from tooldock.runtime.admission import Slots


async def _script(make: type[asyncio.Semaphore], seed: int) -> tuple[list[str], int, int]:
    rng = random.Random(seed)
    slots, log, inside, most = make(3), [], 0, 0

    async def call(name: str, hold: int) -> None:
        nonlocal inside, most
        async with slots:
            inside += 1
            most = max(most, inside)
            log.append(f"in {name}")
            try:
                for _ in range(hold):
                    await asyncio.sleep(0)
            finally:
                inside -= 1
                log.append(f"out {name}")

    tasks = []
    for step in range(60):
        choice = rng.random()
        if choice < 0.6:
            tasks.append(asyncio.create_task(call(f"c{step}", rng.randrange(4))))
        elif choice < 0.75 and tasks:
            victim = rng.choice(tasks)
            if victim.cancel():
                log.append(f"cancel {tasks.index(victim)}")
        for _ in range(rng.randrange(3)):
            await asyncio.sleep(0)
    await asyncio.gather(*tasks, return_exceptions=True)
    return log, slots._value, most


@pytest.mark.parametrize("seed", range(40))
def test_slots_run_a_script_as_asyncios_semaphore_does(seed: int) -> None:
    ours = asyncio.run(_script(Slots, seed))
    theirs = asyncio.run(_script(asyncio.Semaphore, seed))
    assert ours == theirs
    log, left, most = ours
    assert left == 3 and most <= 3
    assert any(entry.startswith("in ") for entry in log)


def test_a_free_slot_is_taken_without_waiting_and_a_full_set_waits() -> None:
    async def main() -> None:
        slots = Slots(1)
        await slots.acquire()
        waiter = asyncio.create_task(slots.acquire())
        await asyncio.sleep(0)
        assert not waiter.done()
        slots.release()
        assert await waiter is True
        slots.release()
        assert slots._value == 1

    asyncio.run(main())
