"""KeyGuard (runtime/keyguard.py) on a real key store, without a gateway: what it holds ends when its key
is revoked or expires, and only then; one look at the file serves every held key."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tooldock.keys import KeyStore
from tooldock.runtime.keyguard import KeyGuard

POLL = 0.05


def run(coro):
    return asyncio.run(coro)


@pytest.fixture
def store(tmp_path: Path) -> KeyStore:
    return KeyStore(tmp_path / "keys")


async def _until(predicate, seconds: float = 5.0) -> None:
    async with asyncio.timeout(seconds):
        while not predicate():
            await asyncio.sleep(POLL / 2)


def test_a_revoked_key_ends_its_holds_once_and_others_stay(store: KeyStore):
    async def go() -> None:
        guard = KeyGuard(store, poll=POLL)
        gone, _ = store.create("gone", "read")
        kept, _ = store.create("kept", "read")
        ended: list[str] = []

        def on(name: str):
            async def end() -> None:
                ended.append(name)
            return end

        first, second, third = guard.hold(gone, on("gone-1")), guard.hold(gone, on("gone-2")), guard.hold(kept, on("kept"))
        await asyncio.sleep(POLL * 3)
        assert ended == [] and len(guard) == 3  # nothing changed: nothing ends
        store.revoke(gone.id)
        await _until(lambda: len(ended) == 2)
        assert sorted(ended) == ["gone-1", "gone-2"] and first.ended and second.ended and not third.ended
        await asyncio.sleep(POLL * 3)
        assert len(ended) == 2 and len(guard) == 1  # told once
        third.release()
        await _until(lambda: guard._task is None or guard._task.done())  # nothing held: it stops looking
        await guard.close()

    run(go())


def test_an_expiring_key_ends_when_its_time_has_passed(store: KeyStore):
    async def go() -> None:
        guard = KeyGuard(store, poll=POLL)
        started = asyncio.get_running_loop().time()
        short, _ = store.create("short", "read", expires_in=1)  # its expiry rounds up: it lives 1-2 s
        ended = asyncio.Event()

        async def end() -> None:
            ended.set()

        guard.hold(short, end)
        await asyncio.wait_for(ended.wait(), 6)
        assert asyncio.get_running_loop().time() - started >= 1 - 0.05  # not before its time
        await guard.close()

    run(go())


def test_a_failing_end_does_not_stop_the_others_and_recheck_answers_now(store: KeyStore, caplog):
    async def go() -> None:
        guard = KeyGuard(store, poll=60)  # no poll in this test: recheck asks at once
        key, _ = store.create("k", "read")
        ended: list[str] = []

        async def boom() -> None:
            raise RuntimeError("boom")

        async def fine() -> None:
            ended.append("fine")

        bad, good = guard.hold(key, boom), guard.hold(key, fine)
        assert await guard.recheck(good) is True and ended == []
        store.revoke(key.id)
        assert await guard.recheck(bad) is False and bad.ended
        assert await guard.recheck(good) is False and ended == ["fine"]
        assert await guard.recheck(good) is False and ended == ["fine"]  # ended already: not again
        await guard.close()

    run(go())
    assert "ending what it held failed" in caplog.text


def test_a_keys_file_that_cannot_be_read_for_a_while_revokes_nothing(store: KeyStore, caplog):
    """Half-written by hand, or a network filesystem's hiccup: what lives on is kept (new requests are
    refused meanwhile, by KeyStore.check), a key whose expiry passes meanwhile still ends (the held key
    carries its expiry), the operator is told once, and a revocation made once the file is back still ends
    what its key held."""
    async def go() -> None:
        guard = KeyGuard(store, poll=POLL)
        key, _ = store.create("k", "read")
        ended: list[str] = []

        async def end() -> None:
            ended.append("k")

        held = guard.hold(key, end)
        short, _ = store.create("short", "read", expires_in=1)  # lives 1-2 s

        async def expired() -> None:
            ended.append("short")

        expiring = guard.hold(short, expired)
        await asyncio.sleep(POLL * 3)  # the guard has looked at the good file: the broken one is a change
        good = store.path.read_text()
        store.path.write_text("{half a file")
        await asyncio.sleep(POLL * 6)
        assert ended == [] and not held.ended and await guard.recheck(held) is True
        await _until(lambda: expiring.ended, 5)  # its expiry needs no file: it ends on time
        assert ended == ["short"] and not held.ended
        ended.clear()
        store.path.write_text(good)  # back, as it was: nothing ends
        await asyncio.sleep(POLL * 6)
        assert ended == []
        store.revoke(key.id)
        await _until(lambda: ended == ["k"])
        await guard.close()

    run(go())
    unreadable = [r for r in caplog.records if "cannot read the keys file" in r.getMessage()]
    assert len(unreadable) == 1 and "not valid JSON" in unreadable[0].getMessage()
    assert any("can be read again" in r.getMessage() for r in caplog.records)
