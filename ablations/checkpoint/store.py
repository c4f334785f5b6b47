"""Where checkpoints live: a small key/bytes protocol over fsspec (file, memory, S3 via s3fs).

Keys are `/`-separated paths relative to the store's root (the plan's `checkpoint.store`).
Every write is a whole object from bytes: S3 has no atomic rename and an exception inside
`with fs.open(..., "wb")` still uploads what was buffered, so no partial object is ever
written through a file handle; a local store's objects go through the output folder's one
atomic writer (whole, synced, with the folder's file mode). What makes a checkpoint exist is
its commit record, written last (see `ablations.checkpoint.commit`).
"""

from __future__ import annotations

import errno
import os
import stat
import uuid
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import fsspec
from fsspec.implementations.local import LocalFileSystem

from ablations.errors import ObjectTooLarge, StoreError, UntrustedObject
from ablations.files.atomic import LINK_REFUSED, atomic_write_below
from ablations.plan.infrastructure import CheckpointSection

S3_TIMEOUTS = {"connect_timeout": 5, "read_timeout": 60}
"""Seconds; botocore's defaults (60 s connect) would hang a run on a dead endpoint for
minutes before the saver's own retries even start."""
S3_SDK_RETRIES = 2
"""Retries inside s3fs/botocore per call; the saver retries whole checkpoints on top."""


CHECK_PREFIX = ".store-check-"
"""The name of the object `check` writes and deletes at the store's root; a kill during the
check leaves it (or its local temporary), which a campaign reopening its folder removes."""


@runtime_checkable
class Store(Protocol):
    """A flat namespace of byte objects under one root URL."""

    url: str

    def put(self, key: str, data: bytes) -> None:
        """Write one whole object (replacing any previous one)."""
        ...

    def get(self, key: str, limit: int | None = None) -> bytes:
        """Read one whole object; `StoreError` when it is missing or unreadable, or larger
        than `limit` bytes (never read past it: an object from a shared store is untrusted)."""
        ...

    def keys(self, prefix: str) -> list[str]:
        """Every object key under `prefix` (recursive), relative to the root."""
        ...

    def delete(self, prefix: str) -> None:
        """Remove everything under `prefix`; nothing there is not an error."""
        ...

    def uri(self, key: str) -> str:
        """The full URL of `key`, for records and reports."""
        ...

    def check(self) -> None:
        """Write, read back and delete a probe object; `StoreError` when that fails."""
        ...


class FsspecStore:
    """`Store` over any fsspec filesystem rooted at `root` (a path in that filesystem)."""

    def __init__(self, fs: Any, root: str, url: str) -> None:
        self.fs = fs
        self.root = root.rstrip("/")
        self.url = url.rstrip("/")

    def _path(self, key: str) -> str:
        return f"{self.root}/{key.strip('/')}" if key.strip("/") else self.root

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        try:
            if isinstance(self.fs, LocalFileSystem):  # often inside the output folder
                # no link below the root followed: a `<campaign>` link planted in the folder
                # would have the checkpoints written wherever it points
                atomic_write_below(Path(self.root), key.strip("/"), data)
            else:
                self.fs.pipe_file(path, data)
        except OSError as exc:
            if exc.strerror == LINK_REFUSED:
                raise UntrustedObject(f"{self.uri(key)}: {LINK_REFUSED} ({exc.filename})") from None
            raise StoreError(f"cannot write {self.uri(key)}: {type(exc).__name__}: {exc}") from exc
        except Exception as exc:
            raise StoreError(f"cannot write {self.uri(key)}: {type(exc).__name__}: {exc}") from exc

    def get(self, key: str, limit: int | None = None) -> bytes:
        end = None if limit is None else limit + 1  # one byte more tells "too large"
        try:
            if isinstance(self.fs, LocalFileSystem):
                data = _read_without_links(self.root, key, end)
            else:
                data = self.fs.cat_file(self._path(key), start=None if end is None else 0, end=end)
        except UntrustedObject as exc:
            raise UntrustedObject(f"{self.uri(key)}: {exc}: refused") from None
        except Exception as exc:
            raise StoreError(f"cannot read {self.uri(key)}: {type(exc).__name__}: {exc}") from exc
        if limit is not None and len(data) > limit:
            raise ObjectTooLarge(
                f"{self.uri(key)} is larger than the {limit} bytes allowed: refused"
            )
        return bytes(data)

    def keys(self, prefix: str) -> list[str]:
        base = self._path(prefix)
        try:
            if not self.fs.exists(base):
                return []
            found = self.fs.find(base)
        except Exception as exc:
            raise StoreError(
                f"cannot list {self.uri(prefix)}: {type(exc).__name__}: {exc}"
            ) from exc
        start = len(self.root.lstrip("/")) + 1
        return sorted(p.lstrip("/")[start:] for p in found)

    def delete(self, prefix: str) -> None:
        base = self._path(prefix)
        try:
            if self.fs.exists(base):
                self.fs.rm(base, recursive=True)
        except FileNotFoundError:
            pass
        except Exception as exc:
            raise StoreError(
                f"cannot delete {self.uri(prefix)}: {type(exc).__name__}: {exc}"
            ) from exc

    def uri(self, key: str) -> str:
        return f"{self.url}/{key.strip('/')}" if key.strip("/") else self.url

    def check(self) -> None:
        key = f"{CHECK_PREFIX}{uuid.uuid4().hex}"
        try:
            self.put(key, b"ok")
            if self.get(key) != b"ok":
                raise StoreError(f"{self.uri(key)} read back different bytes than were written")
            self.delete(key)
        except StoreError as exc:
            raise StoreError(
                f"checkpoint store {self.url} is not usable (checked before any training): {exc}"
            ) from exc


def _read_without_links(root: str, key: str, end: int | None) -> bytes:
    """The object at `key` under a local store's `root`, read without following a symbolic
    link anywhere below the root: each folder opened relative to the last with `O_NOFOLLOW`,
    then the file the same way, so a link planted in a shared `file://` store (an export
    pointing at a secret of this machine) is refused, and not even between a check and the
    open. The root itself may be a link: the plan names it. At most `end` bytes are read."""
    parts = [part for part in key.strip("/").split("/") if part]
    if not parts or any(part in (".", "..") for part in parts):
        raise UntrustedObject(f"{key!r} is not a key of this store")
    flags = os.O_RDONLY | os.O_CLOEXEC
    folder = os.open(root, flags | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            inner = _open_below(folder, part, flags | os.O_DIRECTORY)
            os.close(folder)
            folder = inner
        # O_NONBLOCK: a FIFO planted as the file must not block the open
        handle = _open_below(folder, parts[-1], flags | os.O_NONBLOCK)
    finally:
        os.close(folder)
    with os.fdopen(handle, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise UntrustedObject("not a regular file")
        return file.read(-1 if end is None else end)


def _open_below(folder: int, name: str, flags: int) -> int:
    try:
        return os.open(name, flags | os.O_NOFOLLOW, dir_fd=folder)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and stat.S_ISLNK(
            os.lstat(name, dir_fd=folder).st_mode
        ):
            raise UntrustedObject(f"{name} is a symbolic link") from None
        raise


def _conforms(store: FsspecStore) -> Store:  # the typed conformance check: mypy fails here
    return store


def open_store(
    section: CheckpointSection, *, check: bool = True, sdk_retries: int = S3_SDK_RETRIES
) -> FsspecStore:
    """The store the plan names, checked reachable and writable (`StoreError` otherwise).

    S3 credentials come from the environment only (AWS_* variables, profiles, instance
    roles): a plan never holds secrets. `sdk_retries` bounds the tries inside s3fs/botocore
    per call (1: none; the saver still retries whole checkpoints)."""
    scheme, _, rest = section.store.partition("://")
    rest = rest.rstrip("/")
    if scheme == "file":
        root = os.path.abspath(rest)  # fixed now: a later chdir must not move the store
        fs = fsspec.filesystem("file", auto_mkdir=True)
        url = f"file://{root}"
    elif scheme == "memory":
        fs = fsspec.filesystem("memory")
        root, url = f"/{rest.lstrip('/')}", section.store.rstrip("/")
    elif scheme == "s3":
        import s3fs

        from ablations.checkpoint.s3_session import s3_session

        fs = s3fs.S3FileSystem(
            endpoint_url=section.endpoint_url,
            session=s3_session(),  # botocore's S3 model parsed once per process, not per store
            skip_instance_cache=True,  # one client per store: no stale endpoint or listing
            use_listings_cache=False,  # listings decide what is committed: never from cache
            config_kwargs={**S3_TIMEOUTS, "retries": {"max_attempts": sdk_retries}},
        )
        fs.retries = sdk_retries  # a class attribute in s3fs, not a constructor argument
        root, url = rest, section.store.rstrip("/")
    else:  # the plan validates schemes; this guards direct callers
        raise StoreError(f"unknown store scheme {scheme!r} in {section.store!r}")
    store = FsspecStore(fs, root, url)
    if check:
        store.check()
    return store
