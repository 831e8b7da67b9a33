"""Tests of KvpoolStorage against a live RESP server.

The server is the one named by KVPOOL_RESP_URL (a kvpool node's RESP front, or
a plain redis-server, which exercises the EXISTS fallback of batch_exists);
tests that need it are skipped when the variable is unset. Every test uses
its own key prefix, so runs do not see each other's keys.

    KVPOOL_RESP_URL=redis://127.0.0.1:6379/0 /usr/bin/python3 -m pytest python/kvpool_hicache/tests -q
"""

import os
import socket
import uuid
from types import SimpleNamespace

import pytest
import redis

from kvpool_hicache import (
    ENV_URL,
    PREFIX_COMMAND,
    KvpoolConfigError,
    KvpoolStorage,
    KvpoolUnavailable,
)

URL = os.environ.get(ENV_URL)
needs_server = pytest.mark.skipif(
    not URL,
    reason=f"{ENV_URL} is unset: point it at a kvpool node's RESP port or a redis-server",
)

MiB = 1 << 20


def config(extra=None, **fields):
    """A stand-in for SGLang's HiCacheStorageConfig with the fields the backend reads."""
    base = dict(
        tp_rank=0,
        tp_size=1,
        pp_rank=0,
        pp_size=1,
        attn_cp_rank=0,
        attn_cp_size=1,
        is_mla_model=False,
        enable_storage_metrics=False,
        is_page_first_layout=True,
        model_name="org/model-7b",
        extra_config=extra,
    )
    base.update(fields)
    return SimpleNamespace(**base)


def loader_extra(**more):
    """The extra config SGLang's dynamic loader would hand over, with a fresh key prefix."""
    extra = {
        "backend_name": "kvpool",
        "module_path": "kvpool_hicache",
        "class_name": "KvpoolStorage",
        "url": URL,
        "key_prefix": f"test-{uuid.uuid4().hex}:",
    }
    extra.update(more)
    return extra


@pytest.fixture
def store():
    # Called as SGLang's factory calls a dynamic backend: (storage_config, kwargs).
    s = KvpoolStorage(config(loader_extra()), {})
    yield s
    s.clear()
    s.close()


@pytest.fixture
def raw():
    r = redis.Redis.from_url(URL)
    yield r
    r.close()


def free_port():
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------ round trips ---


@needs_server
def test_set_get_1mib_binary_round_trip(store):
    value = os.urandom(MiB)
    assert store.set("page-1mib", value) is True
    assert store.get("page-1mib") == value

    target = bytearray(MiB)
    got = store.get("page-1mib", target)
    assert got is target
    assert bytes(target) == value


@needs_server
def test_get_into_memoryview_target(store):
    value = os.urandom(4096)
    assert store.set("page-mv", memoryview(value))
    backing = bytearray(4096)
    got = store.get("page-mv", memoryview(backing))
    assert got is not None
    assert bytes(backing) == value


@needs_server
def test_every_byte_value_survives(store):
    # Every byte 0..255, CR LF pairs and a RESP-looking prefix: a server or
    # client that parsed the payload instead of counting its length breaks here.
    value = b"$-1\r\n*2\r\n" + bytes(range(256)) * 257 + b"\r\n\x00"
    assert store.set("all-bytes", value)
    assert store.get("all-bytes") == value
    assert store.batch_get(["all-bytes"]) == [value]


@needs_server
def test_batch_set_batch_get_100_keys(store):
    keys = [f"page-{i:03d}" for i in range(100)]
    values = [os.urandom(1000 + 37 * i) for i in range(100)]
    assert store.batch_set(keys, values) is True

    assert store.batch_get(keys) == values

    targets = [bytearray(len(v)) for v in values]
    got = store.batch_get(keys, targets)
    assert all(g is t for g, t in zip(got, targets))
    assert [bytes(t) for t in targets] == values


@needs_server
def test_batch_set_of_nothing_is_true(store):
    assert store.batch_set([], []) is True
    assert store.batch_get([]) == []


@needs_server
def test_batch_set_length_mismatch_is_false(store):
    assert store.batch_set(["a", "b"], [b"x"]) is False
    assert store.exists("a") is False


# ------------------------------------------------------- missing and exists ---


@needs_server
def test_missing_key(store):
    assert store.get("never-written") is None
    assert store.get("never-written", bytearray(16)) is None
    assert store.exists("never-written") is False
    store.set("written", b"v")
    assert store.batch_get(["written", "never-written"]) == [b"v", None]


@needs_server
def test_exists(store):
    assert store.exists("k") is False
    store.set("k", b"\x00")
    assert store.exists("k") is True


@needs_server
def test_batch_exists_counts_the_leading_run(store):
    keys = [f"chain-{i}" for i in range(12)]
    present = [k for i, k in enumerate(keys) if i != 10]
    assert store.batch_set(present, [b"p%d" % i for i in range(len(present))])

    assert store.batch_exists(keys) == 10  # 0..9 present, 10 absent, 11 present
    assert store.batch_exists(keys[:10]) == 10
    assert store.batch_exists(keys[10:]) == 0
    assert store.batch_exists(keys[11:]) == 1
    assert store.batch_exists([]) == 0
    # SGLang passes extra_info as the second argument.
    assert store.batch_exists(keys, None) == 10


@needs_server
def test_batch_exists_path_is_remembered(store):
    store.set("a", b"1")
    store.batch_exists(["a", "b"])
    # True on a kvpool node (KVPOOL.PREFIX), False on a plain Redis (EXISTS scan).
    assert store._prefix_supported is not None
    assert store.batch_exists(["a", "b"]) == 1


@needs_server
def test_prefix_command_semantics(raw):
    """KVPOOL.PREFIX itself, where the server has it (a kvpool node)."""
    p = f"test-{uuid.uuid4().hex}:"
    try:
        raw.execute_command(PREFIX_COMMAND, p + "absent")
    except redis.ResponseError as e:
        if "unknown command" in str(e).lower():
            pytest.skip(f"{URL} has no {PREFIX_COMMAND} (plain Redis)")
        raise
    try:
        raw.set(p + "1", b"x")
        raw.set(p + "2", b"y")
        raw.set(p + "4", b"z")
        assert raw.execute_command(PREFIX_COMMAND, p + "1", p + "2", p + "4") == 3
        assert raw.execute_command(PREFIX_COMMAND, p + "1", p + "2", p + "3", p + "4") == 2
        assert raw.execute_command(PREFIX_COMMAND, p + "3", p + "1") == 0
    finally:
        raw.delete(p + "1", p + "2", p + "4")


@needs_server
def test_size_mismatch_with_target_is_a_miss(store):
    store.set("short", b"abc")
    target = bytearray(b"untouched")
    assert store.get("short", target) is None
    assert target == bytearray(b"untouched")


# ------------------------------------------------------------- key naming ---


@needs_server
def test_keys_carry_model_and_rank(raw):
    extra = loader_extra()
    s = KvpoolStorage(config(extra, tp_rank=3, tp_size=4), {})
    try:
        s.set("h", b"v")
        name = extra["key_prefix"] + "h_org-model-7b_3_4"
        assert s.storage_key("h") == name
        assert raw.get(name) == b"v"
    finally:
        s.clear()
        s.close()


def test_key_suffixes_follow_sglangs_file_backend():
    suffix = KvpoolStorage._suffix
    assert suffix(config(tp_rank=1, tp_size=2)) == "_org-model-7b_1_2"
    assert suffix(config(tp_rank=1, tp_size=2, is_mla_model=True)) == "_org-model-7b"
    assert suffix(config(pp_rank=1, pp_size=2)) == "_org-model-7b_0_1_2_1"
    assert suffix(config(attn_cp_rank=1, attn_cp_size=2)) == "_org-model-7b_0_1_cp1_2"
    assert suffix(config(model_name=None)) == "__0_1"


@needs_server
def test_clear_deletes_only_its_own_keys(raw):
    a = KvpoolStorage(config(loader_extra()), {})
    b = KvpoolStorage(config(loader_extra()), {})
    try:
        a.batch_set(["x", "y"], [b"1", b"2"])
        b.set("x", b"3")
        assert a.clear() is True
        assert a.batch_exists(["x", "y"]) == 0
        assert b.get("x") == b"3"
    finally:
        b.clear()
        a.close()
        b.close()


# ---------------------------------------------------------- value types ---


@needs_server
def test_numpy_array_values(store):
    np = pytest.importorskip("numpy")
    arr = np.arange(1024, dtype=np.float32).reshape(32, 32)
    assert store.set("np", arr)
    assert store.get("np") == arr.tobytes()
    out = np.zeros_like(arr)
    assert store.get("np", out) is out
    assert (out == arr).all()
    # A non-contiguous array is sent as its logical bytes.
    assert store.set("np-t", arr.T)
    assert store.get("np-t") == np.ascontiguousarray(arr.T).tobytes()


@needs_server
def test_torch_tensor_values(store):
    torch = pytest.importorskip("torch")
    t = torch.arange(4096, dtype=torch.bfloat16)
    assert store.set("t", t)
    out = torch.zeros_like(t)
    assert store.get("t", out) is out
    assert torch.equal(out, t)


@needs_server
def test_buffers_of_other_formats_and_shapes(store):
    import array

    words = array.array("I", range(1000))  # format "I", 4 bytes an item
    assert store.set("words", words)
    assert store.get("words") == words.tobytes()
    out = array.array("I", [0] * 1000)
    assert store.get("words", out) is out
    assert out == words

    square = memoryview(bytearray(range(256))).cast("B", shape=[16, 16])  # 2-D view
    assert store.set("square", square)
    assert store.get("square") == bytes(range(256))


@needs_server
def test_str_value_is_refused(store):
    assert store.set("s", "text") is False
    assert store.exists("s") is False


# ------------------------------------------------------- SGLang's v1 path ---


class FakeHostPool:
    """Host pool with SGLang's flat-page accessors over bytearrays."""

    page_size = 4

    def __init__(self, pages, page_bytes):
        self.page_bytes = page_bytes
        self.pages = {i * self.page_size: bytearray(os.urandom(page_bytes)) for i in range(pages)}

    def get_data_page(self, index, flat=True):
        return self.pages[index]

    def get_dummy_flat_data_page(self):
        return bytearray(self.page_bytes)

    def set_from_flat_data_page(self, index, data_page):
        self.pages[index] = bytearray(data_page)


@needs_server
def test_v1_page_path_through_host_pool():
    src = FakeHostPool(pages=8, page_bytes=2048)
    s = KvpoolStorage(config(loader_extra(interface_v1=1)), src)  # built-in style: (config, pool)
    try:
        keys = [f"v1-{i}" for i in range(8)]
        indices = list(range(0, 8 * src.page_size))
        assert s.batch_set_v1(keys, indices) == [True] * 8

        dst = FakeHostPool(pages=8, page_bytes=2048)
        s.register_mem_pool_host(dst)
        assert s.batch_get_v1(keys + ["v1-missing"], indices + [0] * src.page_size) == [True] * 8 + [False]
        assert dst.pages == src.pages
    finally:
        s.clear()
        s.close()


# ---------------------------------------------------- errors and config ---


@needs_server
def test_server_lost_after_start_gives_misses_not_exceptions(store, caplog):
    # SGLang calls the backend from its prefetch and backup threads, which an
    # exception would end for good: a lost server must read as misses.
    store.set("k", b"v")
    live = store._r
    store._r = redis.Redis.from_url(f"redis://127.0.0.1:{free_port()}/0", socket_connect_timeout=2)
    try:
        assert store.get("k") is None
        assert store.batch_get(["k", "k2"]) == [None, None]
        assert store.set("k", b"v") is False
        assert store.batch_set(["k"], [b"v"]) is False
        assert store.exists("k") is False
        assert store.batch_exists(["k"]) == 0
        assert store.clear() is False
        assert "failed" in caplog.text
        assert store.get_stats()["errors"] >= 7
    finally:
        store._r = live


def test_unreachable_server_names_the_url():
    url = f"redis://127.0.0.1:{free_port()}/0"
    with pytest.raises(KvpoolUnavailable) as e:
        KvpoolStorage(config({"url": url, "connect_timeout_s": 2}), {})
    assert url in str(e.value)


def test_unreachable_server_hides_the_password():
    url = f"redis://user:s3cret@127.0.0.1:{free_port()}/0"
    with pytest.raises(KvpoolUnavailable) as e:
        KvpoolStorage(config({"url": url, "connect_timeout_s": 2}), {})
    assert "s3cret" not in str(e.value)
    assert f"127.0.0.1:{url.rsplit(':', 1)[1].split('/')[0]}" in str(e.value)


@needs_server
def test_refused_token_names_the_url():
    try:
        s = KvpoolStorage(config(loader_extra(tenant_token="no-such-token-" + uuid.uuid4().hex)), {})
    except KvpoolUnavailable as e:
        assert "refused" in str(e)
        assert "no-such-token" not in str(e)
        return
    s.close()
    pytest.skip(f"{URL} accepted an unknown token (no authentication configured)")


def test_url_from_environment(monkeypatch):
    url = f"redis://127.0.0.1:{free_port()}/0"
    monkeypatch.setenv(ENV_URL, url)
    with pytest.raises(KvpoolUnavailable) as e:
        KvpoolStorage(config({}), {})
    assert url in str(e.value)


def test_no_url_is_a_config_error(monkeypatch):
    monkeypatch.delenv(ENV_URL, raising=False)
    with pytest.raises(KvpoolConfigError) as e:
        KvpoolStorage(config({"backend_name": "kvpool"}), {})
    assert ENV_URL in str(e.value)


def test_bad_scheme_is_a_config_error():
    with pytest.raises(KvpoolConfigError) as e:
        KvpoolStorage(config({"url": "http://127.0.0.1:6379"}), {})
    assert "redis://" in str(e.value)


def test_token_and_password_together_is_a_config_error():
    with pytest.raises(KvpoolConfigError):
        KvpoolStorage(config({"url": "redis://127.0.0.1:1/0", "tenant_token": "t", "password": "p"}), {})


def test_subclasses_sglangs_base_when_sglang_is_present():
    hs = pytest.importorskip("sglang.srt.mem_cache.hicache_storage")
    assert issubclass(KvpoolStorage, hs.HiCacheStorage)
