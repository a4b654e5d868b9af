"""The state store (issue 56): one contract, two implementations (memory, a real Redis), each held to it by
the same tests; what a lost or silent Redis does (a clear StateUnavailable within a bound, never a hang),
and that a Redis URL's password is never shown."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Iterator

import pytest
from rediskit import RedisServer

from tooldock.errors import StateUnavailable
from tooldock.state import MemoryStore, Store, open_store, parse_url
from tooldock.state.redisstore import TIMEOUT, RedisStore


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.cleanup()


@pytest.fixture(params=["memory", "redis"])
def make_store(request: pytest.FixtureRequest) -> Iterator:
    """Makes stores of one kind; two Redis stores made here share one server (two replicas)."""
    made: list[Store] = []
    if request.param == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        server.flush()
        shared = None
    else:
        shared = MemoryStore()

    def make() -> Store:
        store = shared if shared is not None else open_store(server.url, namespace="test")
        made.append(store)
        return store

    yield make
    for store in made:
        asyncio.run(store.close())


def run(coroutine):
    return asyncio.run(coroutine)


def test_a_bucket_admits_its_burst_then_one_token_per_period(make_store):
    async def go() -> None:
        store = make_store()
        waits = [await store.take_token("ns:a", 2.0, 3.0) for _ in range(4)]
        assert waits[:3] == [0.0, 0.0, 0.0]
        assert 0.4 < waits[3] <= 0.5  # a token comes back every 0.5 s
        await asyncio.sleep(0.55)
        assert await store.take_token("ns:a", 2.0, 3.0) == 0.0
        assert await store.take_token("ns:a", 2.0, 3.0) > 0
        assert await store.take_token("ns:b", 2.0, 3.0) == 0.0  # buckets are separate

    run(go())


def test_a_changed_limit_starts_a_full_bucket(make_store):
    async def go() -> None:
        store = make_store()
        assert [await store.take_token("k", 1.0, 1.0) for _ in range(2)][1] > 0
        assert await store.take_token("k", 1.0, 2.0) == 0.0  # a new burst: full again

    run(go())


def test_two_replicas_never_take_more_than_the_bucket_holds(make_store):
    """Forty takes at once from two stores on one Redis (or one memory store): exactly the burst passes."""

    async def go() -> None:
        first, second = make_store(), make_store()
        takes = [(first if i % 2 else second).take_token("shared", 0.001, 10.0) for i in range(40)]
        waits = await asyncio.gather(*takes)
        assert sum(1 for w in waits if w == 0.0) == 10

    run(go())


def test_published_messages_reach_every_subscriber_in_order(make_store):
    async def go() -> None:
        store, other = make_store(), make_store()
        got: list[str] = []

        async def listen(messages: AsyncIterator[str]) -> None:
            async for message in messages:
                got.append(message)
                if len(got) == 3:
                    return

        listener = asyncio.ensure_future(listen(other.subscribe("reloads")))
        await asyncio.sleep(0.3)  # subscribed
        for n in range(3):
            await store.publish("reloads", f"m{n}")
        await asyncio.wait_for(listener, 5)
        assert got == ["m0", "m1", "m2"]

    run(go())


def test_a_redis_that_is_not_there_is_state_unavailable_at_once(tmp_path):
    async def go() -> None:
        store = open_store(f"unix://{tmp_path}/nothing.sock")
        started = time.monotonic()
        with pytest.raises(StateUnavailable) as refused:
            await store.take_token("x", 1.0, 1.0)
        assert time.monotonic() - started < 2 * TIMEOUT + 0.5
        assert refused.value.status == 503 and refused.value.details["retry_after_seconds"] == 1
        assert "nothing.sock" in refused.value.message
        await store.close()

    run(go())


def test_a_redis_that_never_answers_is_state_unavailable_within_its_time_limit():
    """A server that accepts connections and says nothing (a hung Redis, a black-holed address): the
    command gives up after its time limit, never hangs."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        port = silent.getsockname()[1]

        async def go() -> None:
            store = open_store(f"redis://127.0.0.1:{port}/0")
            started = time.monotonic()
            with pytest.raises(StateUnavailable):
                await store.take_token("x", 1.0, 1.0)
            assert time.monotonic() - started < 2 * TIMEOUT + 0.5
            await store.close()

        run(go())


def test_a_lost_redis_is_used_again_once_it_is_back(tmp_path):
    server = RedisServer(tmp_path / "redis").start()
    try:
        async def go() -> None:
            store = open_store(server.url)
            assert await store.take_token("x", 100.0, 100.0) == 0.0
            server.stop()
            with pytest.raises(StateUnavailable):
                await store.take_token("x", 100.0, 100.0)
            server.start()
            assert await store.take_token("x", 100.0, 100.0) == 0.0  # no new store, no restart
            await store.close()

        run(go())
    finally:
        server.cleanup()


def test_a_password_in_the_url_is_never_shown(tmp_path):
    server = RedisServer(tmp_path / "redis", tcp=True, password="s3cret-redis-pass").start()
    try:
        url = parse_url(server.url)
        assert "s3cret" not in str(url) and "s3cret" not in repr(url) and ":***@" in str(url)

        async def go() -> None:
            store = open_store(server.url)
            await store.check()  # the password works
            assert "s3cret" not in store.describe()
            server.stop()
            with pytest.raises(StateUnavailable) as refused:
                await store.check()
            assert "s3cret" not in str(refused.value) and "s3cret" not in repr(refused.value.details)
            await store.close()

        run(go())
        wrong = RedisStore(parse_url(server.url.replace("s3cret-redis-pass", "wrong-pass")))
        server.start()

        async def refused() -> None:
            with pytest.raises(StateUnavailable) as refusal:
                await wrong.check()
            assert "wrong-pass" not in str(refusal.value)
            await wrong.close()

        run(refused())
    finally:
        server.cleanup()


@pytest.mark.parametrize(
    "raw, words",
    [
        ("http://127.0.0.1:6379", "scheme must be redis://"),
        ("redis://", "no host"),
        ("redis://127.0.0.1:6379/zero", "database number"),
        ("unix://relative.sock", "absolute path"),
        ("redis://:hunter2pass@127.0.0.1:99999/0", "not a URL"),
        ("redis://127.0.0.1:0/0", "port 0"),
    ],
)
def test_bad_urls_say_what_is_wrong_without_the_password(raw, words):
    with pytest.raises(ValueError) as refused:
        parse_url(raw)
    assert words in str(refused.value)
    assert "hunter2" not in str(refused.value)


def test_the_settings_refuse_a_bad_url_and_read_it_from_a_file(tmp_path):
    from tooldock.runtime.settings import Settings, SettingsError

    base = {"TOOLDOCK_BEARER_TOKEN": "x" * 16, "TOOLDOCK_STATE_KEY": "k" * 43}  # a store needs a key too
    with pytest.raises(SettingsError, match="scheme must be"):
        Settings.from_env({**base, "TOOLDOCK_STATE_URL": "memcached://x"})
    assert Settings.from_env(base).state_url is None
    secret = tmp_path / "url"
    secret.write_text("redis://:pw-in-a-file@127.0.0.1:6379/0\n")
    url = Settings.from_env({**base, "TOOLDOCK_STATE_URL_FILE": str(secret)}).state_url
    assert url is not None and url.url.endswith("@127.0.0.1:6379/0") and "pw-in-a-file" not in str(url)


def test_values_are_kept_until_they_expire_or_are_deleted(make_store):
    async def go() -> None:
        store, other = make_store(), make_store()
        await store.put("session:a", "facts", 0.5)
        assert await other.get("session:a") == "facts"  # another replica sees it
        assert await other.get("session:b") is None
        await store.put("session:c", "gone", 30)
        await other.delete("session:c")
        assert await store.get("session:c") is None
        await asyncio.sleep(0.6)
        assert await store.get("session:a") is None  # expired

    run(go())


def test_a_subscription_lost_with_redis_says_so_when_it_is_back(tmp_path):
    """Messages sent while Redis was away are gone: the subscription yields RESYNC once it is back, so its
    reader looks at the state again, then goes on with what is published after."""
    from tooldock.state import RESYNC

    server = RedisServer(tmp_path / "redis").start()
    try:
        async def go() -> None:
            store, publisher = open_store(server.url), open_store(server.url)
            messages = store.subscribe("news")
            first = asyncio.ensure_future(messages.__anext__())
            await asyncio.sleep(0.3)
            await publisher.publish("news", "one")
            assert await asyncio.wait_for(first, 5) == "one"
            server.restart()
            assert await asyncio.wait_for(messages.__anext__(), 10) == RESYNC
            following = asyncio.ensure_future(messages.__anext__())
            await asyncio.sleep(0.3)
            await publisher.publish("news", "two")
            assert await asyncio.wait_for(following, 5) == "two"
            await messages.aclose()
            await store.close()
            await publisher.close()

        run(go())
    finally:
        server.cleanup()


def test_streams_keep_their_newest_entries_in_order_and_read_after_any_of_them(make_store):
    async def go() -> None:
        store, other = make_store(), make_store()
        ids = [await store.append("events:a", f"e{n}", keep=3, ttl=30) for n in range(5)]
        assert len(set(ids)) == 5
        assert await other.read_after("events:a", ids[2]) == [(ids[3], "e3"), (ids[4], "e4")]  # another replica
        assert await other.read_after("events:a", ids[4]) == []
        assert await other.read_after("events:a", ids[0]) in (None, [(i, f"e{n + 1}") for n, i in enumerate(ids[1:])])
        assert await other.read_after("events:a", "not-an-id") is None
        assert await other.read_after("events:b", ids[2]) is None  # not that stream's
        await store.append("events:short", "x", keep=10, ttl=0.3)
        await asyncio.sleep(0.5)
        assert await store.read_after("events:short", "") is None  # expired (and "" is no entry)

    run(go())


def test_a_read_waits_for_the_next_entry_when_asked(make_store):
    async def go() -> None:
        store, other = make_store(), make_store()
        first = await store.append("events:live", "one", keep=10, ttl=30)
        started = asyncio.get_running_loop().time()
        assert await other.read_after("events:live", first, wait=0.3) == []  # nothing came
        assert asyncio.get_running_loop().time() - started >= 0.25

        async def later() -> str:
            await asyncio.sleep(0.1)
            return await store.append("events:live", "two", keep=10, ttl=30)

        appended = asyncio.ensure_future(later())
        found = await other.read_after("events:live", first, wait=0.5)
        assert found == [(await appended, "two")]

    run(go())


def test_several_streams_are_read_at_once_from_where_each_was_read_last(make_store):
    """`read_new` (how a replica follows the GET streams it holds): entries after each position, whether or
    not that entry is still there, waiting for the next one when asked; `last_entry` is where "from now on"
    starts, also for a stream that is not there yet."""

    async def go() -> None:
        store, other = make_store(), make_store()
        start = await other.last_entry("events:n1")  # no stream yet
        first = await store.append("events:n1", "one", keep=2, ttl=30)
        assert await other.read_new({"events:n1": start, "events:n2": await other.last_entry("events:n2")}) == {
            "events:n1": [(first, "one")]}
        assert await other.last_entry("events:n1") == first
        later = [await store.append("events:n1", f"e{n}", keep=2, ttl=30) for n in range(3)]
        found = await other.read_new({"events:n1": first})  # "one" dropped: about the newest 2 kept
        assert found["events:n1"][-2:] == [(later[1], "e1"), (later[2], "e2")] and len(found["events:n1"]) <= 3
        started = asyncio.get_running_loop().time()
        assert await other.read_new({"events:n1": later[2]}, wait=0.3) == {}
        assert asyncio.get_running_loop().time() - started >= 0.25

        async def append_soon() -> str:
            await asyncio.sleep(0.1)
            return await store.append("events:n2", "two", keep=10, ttl=30)

        appended = asyncio.ensure_future(append_soon())
        found = await other.read_new({"events:n1": later[2], "events:n2": await other.last_entry("events:n2")}, 0.5)
        assert found == {"events:n2": [(await appended, "two")]}

    run(go())


def test_a_swap_returns_what_was_there_and_groups_keep_their_members_until_each_expires(make_store):
    """`swap` (a reload's one teller among the replicas: sharedreloads.py), groups (the sessions with a GET
    stream) and `append_many` (one round trip for many streams), as another replica sees them."""

    async def go() -> None:
        store, other = make_store(), make_store()
        assert await store.swap("listing:a", "v1", 30) is None
        told = await asyncio.gather(*(s.swap("listing:a", "v2", 30) for s in (store, other, store, other)))
        assert sorted(told, key=str) == ["v1", "v2", "v2", "v2"]  # exactly one saw the change
        await store.add_member("streams:a", "s1", 30)
        await other.add_member("streams:a", "s2", 0.3)
        await store.add_member("streams:a", "s3", 30)
        assert sorted(await other.members("streams:a")) == ["s1", "s2", "s3"]
        await other.remove_member("streams:a", "s3")
        await other.remove_member("streams:a", "never")
        await asyncio.sleep(0.4)
        assert await store.members("streams:a") == ["s1"]  # s2 expired, s3 removed
        assert await store.members("streams:none") == []
        ids = await store.append_many([("events:m1", "a"), ("events:m2", "b"), ("events:m1", "c")], keep=10, ttl=30)
        assert await other.read_after("events:m1", ids[0]) == [(ids[2], "c")]
        assert await other.last_entry("events:m2") == ids[1]
        assert await store.append_many([], keep=10, ttl=30) == []

    run(go())
