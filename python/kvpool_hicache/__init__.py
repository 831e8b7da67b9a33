"""SGLang HiCache storage backend for kvpool's Redis-compatible (RESP2) front.

Load it in SGLang with::

    --hicache-storage-backend dynamic
    --hicache-storage-backend-extra-config '{"backend_name": "kvpool",
        "module_path": "kvpool_hicache", "class_name": "KvpoolStorage",
        "url": "redis://127.0.0.1:6379/0"}'

See README.md beside this file.
"""

from .backend import (
    ENV_URL,
    HAVE_SGLANG,
    PREFIX_COMMAND,
    KvpoolConfigError,
    KvpoolStorage,
    KvpoolUnavailable,
)

__all__ = [
    "ENV_URL",
    "HAVE_SGLANG",
    "PREFIX_COMMAND",
    "KvpoolConfigError",
    "KvpoolStorage",
    "KvpoolUnavailable",
]
