"""Files on an object store that the acker reads itself rather than through Spark: the event
files of ``acker ingest s3a://bucket/folder/``, listed and fetched with pyarrow's S3 client.
The client is set up from the S3A settings the session's connector reads (``[spark.conf]``
``spark.hadoop.fs.s3a.*``: endpoint, region, path-style access, keys), so one set of settings
reaches the warehouse and the landing folder; without keys it takes AWS's default chain
(environment, profile, instance role), as the connector does.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from pyarrow import fs as pafs

from pipelines.errors import UnreadableInput

__all__ = [
    "S3_SCHEME",
    "ListedObject",
    "fetch",
    "is_object_store_path",
    "list_files",
    "s3_filesystem",
]

S3_SCHEME = "s3a://"
_S3A = "spark.hadoop.fs.s3a."


def is_object_store_path(path: str | Path) -> bool:
    """Whether ``path`` names a file or folder on S3 (``s3a://bucket/key``)."""
    return isinstance(path, str) and path.startswith(S3_SCHEME)


def s3_filesystem(spark_conf: Mapping[str, str]) -> pafs.S3FileSystem:
    """A pyarrow S3 client with the S3A settings of ``spark_conf``."""

    def setting(name: str) -> str | None:
        return spark_conf.get(_S3A + name)

    options: dict[str, object] = {}
    endpoint = setting("endpoint")
    if endpoint:
        scheme, _, host = endpoint.rpartition("://")
        if not scheme:
            secure = (setting("connection.ssl.enabled") or "true").lower() == "true"
            scheme = "https" if secure else "http"
        options |= {"endpoint_override": host.rstrip("/"), "scheme": scheme}
        options["force_virtual_addressing"] = (setting("path.style.access") or "").lower() != "true"
    region = setting("endpoint.region")
    if region:
        options["region"] = region
    if setting("access.key") and setting("secret.key"):
        options |= {"access_key": setting("access.key"), "secret_key": setting("secret.key")}
        if setting("session.token"):
            options["session_token"] = setting("session.token")
    elif "Anonymous" in (setting("aws.credentials.provider") or ""):
        options["anonymous"] = True
    return pafs.S3FileSystem(**options)


def _key(uri: str) -> str:
    return uri[len(S3_SCHEME) :].rstrip("/")


def list_files(store: pafs.FileSystem, uri: str) -> tuple[list[ListedObject], bool]:
    """The object ``uri`` names, or every object under it as a folder, in order, and whether
    it named a folder; :class:`UnreadableInput` where there is neither, or the store cannot be
    read."""
    try:
        found = store.get_file_info(_key(uri))
        if found.type == pafs.FileType.File:
            return [_listed(found)], False
        if found.type == pafs.FileType.NotFound:
            raise UnreadableInput(f"{uri}: no such file or folder")
        listed = store.get_file_info(pafs.FileSelector(_key(uri), recursive=True))
    except OSError as error:
        raise UnreadableInput(f"{uri}: {str(error).splitlines()[0]}") from error
    objects = [_listed(info) for info in listed if info.type == pafs.FileType.File]
    return sorted(objects), True


ListedObject = tuple[str, int, int]
"""An object's ``s3a://`` URI, size in bytes and modification time in nanoseconds (to the
second), as its listing gives them."""


def _listed(info: pafs.FileInfo) -> ListedObject:
    return S3_SCHEME + info.path, info.size, info.mtime_ns


def fetch(store: pafs.FileSystem, uri: str, folder: Path) -> Path:
    """Copy the object ``uri`` into ``folder``, under its own name; the copy's path."""
    copy = folder / PurePosixPath(_key(uri)).name
    try:
        with store.open_input_stream(_key(uri)) as source, copy.open("wb") as target:
            shutil.copyfileobj(source, target, 1 << 20)
    except OSError as error:
        raise UnreadableInput(f"{uri}: {str(error).splitlines()[0]}") from error
    return copy
