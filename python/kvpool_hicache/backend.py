"""KvpoolStorage: an SGLang HiCache storage backend over kvpool's RESP front.

SGLang loads it with ``--hicache-storage-backend dynamic`` (see README.md):
its storage backend factory imports ``module_path``, checks that
``class_name`` subclasses ``HiCacheStorage`` and calls
``KvpoolStorage(storage_config, kwargs)``, where ``storage_config`` is a
``HiCacheStorageConfig`` whose ``extra_config`` is the parsed
``--hicache-storage-backend-extra-config`` JSON and ``kwargs`` is the
factory's (normally empty) keyword dict.

The backend needs only redis-py (4.3 or later). Values travel as raw bytes:
a torch tensor is sent as the bytes of its memory (converted only when
torch is importable), and a read lands in the target buffer SGLang hands
over (a torch tensor, or anything that exposes a writable buffer); without
a target a read returns bytes.

The same class works against a plain Redis: ``batch_exists`` uses kvpool's
``KVPOOL.PREFIX`` and falls back, once and for the life of the backend, to a
pipelined ``EXISTS`` scan when the server answers "unknown command".
"""

from __future__ import annotations

import abc
import logging
import os
import threading
import time
from typing import Any, Dict, List, Optional, Sequence
from urllib.parse import urlsplit, urlunsplit

import redis

logger = logging.getLogger(__name__)

ENV_URL = "KVPOOL_RESP_URL"
PREFIX_COMMAND = "KVPOOL.PREFIX"
ERROR_LOG_INTERVAL_S = 10.0

# Keys of the extra config that belong to SGLang's loader, not to us.
_LOADER_KEYS = {"backend_name", "module_path", "class_name", "interface_v1"}
# Keys this backend reads; anything else is reported once, so a typo does not
# silently fall back to a default.
_OWN_KEYS = {
    "url",
    "password",
    "tenant_token",
    "username",
    "key_prefix",
    "connect_timeout_s",
    "timeout_s",
    "max_connections",
    "mget_batch",
}


class KvpoolUnavailable(ConnectionError):
    """The RESP server named by the configuration cannot be reached."""


class KvpoolConfigError(ValueError):
    """The backend's configuration is incomplete or contradictory."""


try:  # pragma: no cover - depends on whether sglang is installed
    from sglang.srt.mem_cache.hicache_storage import HiCacheStorage as _Base

    HAVE_SGLANG = True
except Exception:  # ImportError, or sglang present but torch/CUDA missing
    HAVE_SGLANG = False

    class _Base(abc.ABC):  # type: ignore[no-redef]
        """Stand-in for sglang's HiCacheStorage with the same method names.

        Used when sglang is not importable, so the backend imports and tests
        without it. Only the parts SGLang's controller relies on are here.
        """

        def register_mem_pool_host(self, mem_pool_host: Any) -> None:
            self.mem_pool_host = mem_pool_host

        def register_mem_host_pool_v2(self, host_pool: Any, host_pool_name: Any) -> None:
            if not hasattr(self, "registered_pools"):
                self.registered_pools = {}
            self.registered_pools[host_pool_name] = host_pool

        @abc.abstractmethod
        def get(self, key, target_location=None, target_sizes=None):
            """The value of key (into target_location if given), or None."""

        @abc.abstractmethod
        def batch_get(self, keys, target_locations=None, target_sizes=None):
            """A list with, per key, its value or None."""

        @abc.abstractmethod
        def set(self, key, value=None, target_location=None, target_sizes=None):
            """Store value under key; True on success."""

        @abc.abstractmethod
        def batch_set(self, keys, values=None, target_locations=None, target_sizes=None):
            """Store every value; True when all were stored."""

        @abc.abstractmethod
        def exists(self, key):
            """Whether key is stored."""

        def batch_exists(self, keys, extra_info=None):
            """How many leading keys are stored."""
            for i, key in enumerate(keys):
                if not self.exists(key):
                    return i
            return len(keys)

        def clear(self):
            pass

        def get_stats(self):
            return None


def _torch():
    """The torch module if it can be imported, else None (imported lazily)."""
    try:
        import torch  # noqa: PLC0415

        return torch
    except Exception:
        return None


def _is_tensor(obj: Any) -> bool:
    return type(obj).__module__.startswith("torch") and hasattr(obj, "element_size")


def _byte_view(value: Any) -> memoryview:
    """A flat, read-only-or-better byte view of value without copying when possible.

    Accepts bytes, bytearray, memoryview, anything with the buffer protocol
    (numpy arrays), and torch tensors (their memory, moved to the CPU first).
    """
    if _is_tensor(value):
        torch = _torch()
        if torch is None:  # a tensor without torch cannot happen; be explicit
            raise TypeError("got a torch tensor but torch cannot be imported")
        t = value.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        t = t.contiguous().reshape(-1).view(torch.uint8)
        value = t.numpy()
    if isinstance(value, str):
        raise TypeError("values are bytes, not str: encode the string first")
    mv = value if isinstance(value, memoryview) else memoryview(value)
    if mv.format == "B" and mv.ndim == 1 and mv.c_contiguous:
        return mv
    if mv.c_contiguous:
        return mv.cast("B")
    return memoryview(mv.tobytes())


class _Target:
    """Where a read lands: a writable byte view, plus how to finish the copy."""

    def __init__(self, target: Any):
        self.target = target
        self._tensor_copy = False
        if _is_tensor(target):
            torch = _torch()
            if target.device.type == "cpu" and target.is_contiguous():
                self.view = memoryview(target.reshape(-1).view(torch.uint8).numpy())
            else:  # fill a staging buffer, then copy_ into the tensor
                self._tensor_copy = True
                self.view = memoryview(bytearray(target.numel() * target.element_size()))
        else:
            mv = memoryview(target)
            if mv.readonly:
                raise TypeError(f"target buffer of type {type(target).__name__} is read-only")
            self.view = mv if (mv.format == "B" and mv.ndim == 1) else mv.cast("B")

    def fill(self, data: bytes) -> Any:
        self.view[:] = data
        if self._tensor_copy:
            torch = _torch()
            staged = torch.frombuffer(self.view, dtype=torch.uint8)
            self.target.copy_(staged.view(self.target.dtype).reshape(self.target.shape))
        return self.target


def _redact(url: str) -> str:
    """url with any password replaced by '***' (for errors and logs)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    netloc = f"{user}:***@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _glob_escape(s: str) -> str:
    out = []
    for ch in s:
        if ch in "*?[]\\":
            out.append("\\")
        out.append(ch)
    return "".join(out)


class KvpoolStorage(_Base):
    """HiCache storage on a kvpool node (or any Redis 7 compatible server).

    Extra-config keys (all optional but the URL, which may come from the
    environment variable KVPOOL_RESP_URL instead):

    url                redis://[user[:password]@]host:port[/db], rediss://..., unix://...
    tenant_token       kvpool tenant token, sent with AUTH (binds the connection to its tenant)
    password           a plain Redis password (AUTH); do not give it with tenant_token
    username           AUTH user name (Redis ACL user)
    key_prefix         prepended to every key (default "")
    connect_timeout_s  TCP connect timeout, seconds (default 5)
    timeout_s          per-command socket timeout, seconds (default 30)
    max_connections    connection pool size (default: redis-py's)
    mget_batch         keys per MGET in batch_get (default 32)

    Keys are SGLang's page hashes with a suffix naming model and rank the way
    SGLang's file backend names its files: "_<model>" then, unless the model is
    MLA (every rank holds the same KV), "_<tp_rank>_<tp_size>"; then
    "_<pp_size>_<pp_rank>" under pipeline parallelism and
    "_cp<cp_rank>_<cp_size>" under attention context parallelism.
    """

    def __init__(self, storage_config: Any = None, kwargs: Any = None):
        extra: Dict[str, Any] = dict(getattr(storage_config, "extra_config", None) or {})
        if isinstance(kwargs, dict):
            extra.update(kwargs)
        elif kwargs is not None and hasattr(kwargs, "get_data_page"):
            # Called the way SGLang calls its built-in backends: (config, host pool).
            self.register_mem_pool_host(kwargs)

        unknown = sorted(set(extra) - _OWN_KEYS - _LOADER_KEYS)
        if unknown:
            logger.warning("kvpool_hicache: ignoring unknown extra-config keys %s", unknown)

        url = extra.get("url") or os.environ.get(ENV_URL)
        if not url:
            raise KvpoolConfigError(
                "kvpool_hicache: no server URL: set \"url\" in "
                "--hicache-storage-backend-extra-config or the environment "
                f"variable {ENV_URL} (e.g. redis://127.0.0.1:6379/0)"
            )
        url = str(url)
        parts = urlsplit(url)
        if parts.scheme not in ("redis", "rediss", "unix"):
            raise KvpoolConfigError(
                f"kvpool_hicache: URL {_redact(url)!r} must start with "
                "redis://, rediss:// or unix://"
            )
        self.url = _redact(url)

        token = extra.get("tenant_token")
        password = extra.get("password")
        if token and password:
            raise KvpoolConfigError(
                "kvpool_hicache: give either \"tenant_token\" or \"password\", not both"
            )
        secret = token or password
        if secret and parts.password:
            raise KvpoolConfigError(
                f"kvpool_hicache: URL {self.url!r} already carries a password; "
                "drop it from the URL or from the extra config"
            )

        conn_kwargs: Dict[str, Any] = {
            "socket_connect_timeout": float(extra.get("connect_timeout_s", 5)),
            "socket_timeout": float(extra.get("timeout_s", 30)),
        }
        if secret:
            conn_kwargs["password"] = str(secret)
        if extra.get("username"):
            conn_kwargs["username"] = str(extra["username"])
        if extra.get("max_connections"):
            conn_kwargs["max_connections"] = int(extra["max_connections"])
        self.mget_batch = max(1, int(extra.get("mget_batch", 32)))

        self.key_prefix = str(extra.get("key_prefix", ""))
        self.key_suffix = self._suffix(storage_config)
        self.is_mla = bool(getattr(storage_config, "is_mla_model", False))

        self._prefix_supported: Optional[bool] = None  # None until the server has told us
        self._lock = threading.Lock()
        self._stats = {"get_hits": 0, "get_misses": 0, "sets": 0, "errors": 0}
        self._last_error_log = float("-inf")

        try:
            self._pool = redis.ConnectionPool.from_url(url, **conn_kwargs)
            self._r = redis.Redis(connection_pool=self._pool)
        except ValueError as e:
            raise KvpoolConfigError(f"kvpool_hicache: bad URL {self.url!r}: {e}") from e
        try:
            self._r.ping()
        except (redis.AuthenticationError, redis.ResponseError) as e:  # bad or missing AUTH
            self._pool.disconnect()
            raise KvpoolUnavailable(
                f"kvpool_hicache: RESP server at {self.url} refused the connection "
                f"(check tenant_token/password): {e}"
            ) from e
        except redis.RedisError as e:
            self._pool.disconnect()
            raise KvpoolUnavailable(
                f"kvpool_hicache: cannot reach RESP server at {self.url}: {e}"
            ) from e
        logger.info(
            "kvpool_hicache: connected to %s (keys '%s<hash>%s')",
            self.url,
            self.key_prefix,
            self.key_suffix,
        )

    # ---------------------------------------------------------------- keys ---

    @staticmethod
    def _suffix(cfg: Any) -> str:
        model = getattr(cfg, "model_name", None) or ""
        model = "-".join(str(model).split("/"))
        tp_rank = int(getattr(cfg, "tp_rank", 0) or 0)
        tp_size = int(getattr(cfg, "tp_size", 1) or 1)
        pp_rank = int(getattr(cfg, "pp_rank", 0) or 0)
        pp_size = int(getattr(cfg, "pp_size", 1) or 1)
        cp_rank = int(getattr(cfg, "attn_cp_rank", 0) or 0)
        cp_size = int(getattr(cfg, "attn_cp_size", 1) or 1)
        suffix = f"_{model}"
        if not bool(getattr(cfg, "is_mla_model", False)):
            suffix += f"_{tp_rank}_{tp_size}"
        if pp_size > 1:
            suffix += f"_{pp_size}_{pp_rank}"
        if cp_size > 1:
            suffix += f"_cp{cp_rank}_{cp_size}"
        return suffix

    def storage_key(self, key: str) -> str:
        """The RESP key under which SGLang's key is stored."""
        return f"{self.key_prefix}{key}{self.key_suffix}"

    # -------------------------------------------------------------- errors ---

    def _failed(self, what: str, err: Exception) -> None:
        """Count a failed command and log it, at most once per ERROR_LOG_INTERVAL_S.

        A lost server fails every lookup of every request; one line per
        interval says so without flooding the log (the rest go to debug).
        """
        now = time.monotonic()
        with self._lock:
            self._stats["errors"] += 1
            loud = now - self._last_error_log >= ERROR_LOG_INTERVAL_S
            if loud:
                self._last_error_log = now
        log = logger.error if loud else logger.debug
        log("kvpool_hicache: %s on %s failed: %s", what, self.url, err)

    # ---------------------------------------------------------------- get ----

    def _land(self, key: str, data: Optional[bytes], target: Any) -> Any:
        """What get returns for data read under key, landing it in target."""
        if data is None:
            with self._lock:
                self._stats["get_misses"] += 1
            return None
        with self._lock:
            self._stats["get_hits"] += 1
        if target is None:
            # Without a target there is no dtype or shape to give the bytes;
            # SGLang's page paths always pass one.
            return data
        dst = _Target(target)
        if len(dst.view) != len(data):
            logger.warning(
                "kvpool_hicache: %s holds %d bytes but the target holds %d; treated as a miss",
                self.storage_key(key),
                len(data),
                len(dst.view),
            )
            return None
        return dst.fill(data)

    def get(self, key, target_location=None, target_sizes=None):
        try:
            data = self._r.get(self.storage_key(key))
        except redis.RedisError as e:
            self._failed(f"GET {self.storage_key(key)!r}", e)
            return None
        return self._land(key, data, target_location)

    def batch_get(self, keys, target_locations=None, target_sizes=None):
        keys = list(keys)
        targets = list(target_locations) if target_locations is not None else [None] * len(keys)
        if len(targets) != len(keys):
            raise ValueError(
                f"batch_get: {len(keys)} keys but {len(targets)} target locations"
            )
        out: List[Any] = []
        for start in range(0, len(keys), self.mget_batch):
            chunk = keys[start : start + self.mget_batch]
            try:
                values = self._r.mget([self.storage_key(k) for k in chunk])
            except redis.RedisError as e:
                self._failed(f"MGET of {len(chunk)} keys", e)
                out.extend([None] * (len(keys) - len(out)))
                return out
            for k, data, t in zip(chunk, values, targets[start : start + len(chunk)]):
                out.append(self._land(k, data, t))
        return out

    # ---------------------------------------------------------------- set ----

    def set(self, key, value=None, target_location=None, target_sizes=None):
        if value is None:
            logger.error("kvpool_hicache: set %r without a value", key)
            return False
        try:
            view = _byte_view(value)
        except (TypeError, ValueError) as e:
            logger.error("kvpool_hicache: set %r: cannot take bytes of %s: %s", key, type(value).__name__, e)
            return False
        try:
            ok = self._r.set(self.storage_key(key), view)
        except redis.RedisError as e:
            self._failed(f"SET {self.storage_key(key)!r}", e)
            return False
        if ok:
            with self._lock:
                self._stats["sets"] += 1
        return bool(ok)

    def batch_set(self, keys, values=None, target_locations=None, target_sizes=None):
        keys = list(keys)
        if values is None:
            logger.error("kvpool_hicache: batch_set of %d keys without values", len(keys))
            return False
        values = list(values)
        if len(values) != len(keys):
            logger.error("kvpool_hicache: batch_set: %d keys but %d values", len(keys), len(values))
            return False
        if not keys:
            return True
        try:
            views = [_byte_view(v) for v in values]
        except (TypeError, ValueError) as e:
            logger.error("kvpool_hicache: batch_set: cannot take bytes of a value: %s", e)
            return False
        pipe = self._r.pipeline(transaction=False)
        for k, v in zip(keys, views):
            pipe.set(self.storage_key(k), v)
        try:
            results = pipe.execute(raise_on_error=False)
        except redis.RedisError as e:
            self._failed(f"pipelined SET of {len(keys)} keys", e)
            return False
        bad = [(k, r) for k, r in zip(keys, results) if r is not True]
        with self._lock:
            self._stats["sets"] += len(keys) - len(bad)
        if bad:
            k, r = bad[0]
            self._failed(f"SET {self.storage_key(k)!r} ({len(bad)} of {len(keys)} failed)", Exception(r))
            return False
        return True

    # ------------------------------------------------------------- exists ----

    def exists(self, key):
        try:
            return self._r.exists(self.storage_key(key)) == 1
        except redis.RedisError as e:
            self._failed(f"EXISTS {self.storage_key(key)!r}", e)
            return False

    def batch_exists(self, keys, extra_info=None):
        """The number of leading keys present (SGLang's prefix-hit count)."""
        keys = list(keys)
        if not keys:
            return 0
        names = [self.storage_key(k) for k in keys]
        if self._prefix_supported is not False:
            try:
                n = int(self._r.execute_command(PREFIX_COMMAND, *names))
                self._prefix_supported = True
                return max(0, min(n, len(keys)))
            except redis.ResponseError as e:
                if "unknown command" not in str(e).lower():
                    self._failed(f"{PREFIX_COMMAND} of {len(keys)} keys", e)
                    return 0
                logger.info(
                    "kvpool_hicache: %s does not know %s; using pipelined EXISTS",
                    self.url,
                    PREFIX_COMMAND,
                )
                self._prefix_supported = False
            except redis.RedisError as e:
                self._failed(f"{PREFIX_COMMAND} of {len(keys)} keys", e)
                return 0
        return self._exists_scan(names)

    def _exists_scan(self, names: Sequence[str]) -> int:
        pipe = self._r.pipeline(transaction=False)
        for name in names:
            pipe.exists(name)
        try:
            results = pipe.execute()
        except redis.RedisError as e:
            self._failed(f"pipelined EXISTS of {len(names)} keys", e)
            return 0
        for i, r in enumerate(results):
            if r != 1:
                return i
        return len(names)

    # ---------------------------------------------- SGLang's v1 page path ----
    # Used when the extra config has "interface_v1": 1. Pages go through the
    # registered host pool's flat-page accessors, as SGLang's file backend does.

    def _page_offsets(self, n: int, host_indices: Any) -> List[int]:
        page = int(getattr(self.mem_pool_host, "page_size", 1) or 1)
        return [int(host_indices[i * page]) for i in range(n)]

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        pool = getattr(self, "mem_pool_host", None)
        if pool is None:
            raise RuntimeError("kvpool_hicache: batch_get_v1 before register_mem_pool_host")
        keys = list(keys)
        targets = [pool.get_dummy_flat_data_page() for _ in keys]
        pages = self.batch_get(keys, targets)
        results = []
        for off, page in zip(self._page_offsets(len(keys), host_indices), pages):
            if page is None:
                results.append(False)
                continue
            pool.set_from_flat_data_page(off, page)
            results.append(True)
        return results

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        pool = getattr(self, "mem_pool_host", None)
        if pool is None:
            raise RuntimeError("kvpool_hicache: batch_set_v1 before register_mem_pool_host")
        keys = list(keys)
        offsets = self._page_offsets(len(keys), host_indices)
        values = [pool.get_data_page(off, flat=True) for off in offsets]
        ok = self.batch_set(keys, values)
        return [ok] * len(keys)

    # -------------------------------------------------------------- admin ----

    def clear(self) -> bool:
        """Delete this backend's keys (its prefix and suffix) only, never the whole server."""
        pattern = f"{_glob_escape(self.key_prefix)}*{_glob_escape(self.key_suffix)}"
        try:
            batch: List[bytes] = []
            for name in self._r.scan_iter(match=pattern, count=512):
                batch.append(name)
                if len(batch) >= 512:
                    self._r.delete(*batch)
                    batch = []
            if batch:
                self._r.delete(*batch)
            return True
        except redis.RedisError as e:
            self._failed(f"clear (SCAN MATCH {pattern!r} + DEL)", e)
            return False

    def get_stats(self):
        with self._lock:
            return dict(self._stats)

    def close(self) -> None:
        self._pool.disconnect()
