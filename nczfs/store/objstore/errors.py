"""The error tables of the object-store stack: one per protocol.

- obstore's failures (every GET, HEAD, LIST and PUT of S3, GCS, Azure and web servers):
  :func:`translate_obstore`, by exception type and, where object_store says no more, by the
  HTTP status and the service's error code in its message;
- boto3's (S3's multipart uploads by id, copies, keys obstore cannot name):
  :func:`translate_boto`, by S3's error code.

Each gives an nczfs exception naming the key, the request and the cause, in one line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import botocore.exceptions
from obstore.exceptions import (
    AlreadyExistsError,
    InvalidPathError,
    PermissionDeniedError,
    PreconditionError,
    UnauthenticatedError,
)

from nczfs.toolbox.errors import (
    BackendError,
    InvalidKey,
    KeyNotFound,
    NameTooLong,
    NczfsError,
    OutcomeUnknown,
    PermissionDenied,
    Stale,
)

# ---------------------------------------------------------------------- obstore


def first_line(exc: BaseException) -> str:
    """What went wrong, in one line: the HTTP status and the service's error code and message
    (S3, GCS and Azure answer ``<Code>``/``<Message>``), else object_store's first line (its
    messages carry a debug dump after it)."""
    text = str(exc)
    status = re.search(r"status code: (\d{3}[^:<]*)", text)
    if status:
        code = re.search(r"<Code>([^<]+)</Code>", text)
        message = re.search(r"<Message>([^<]+)</Message>", text) or re.search(r'"message"\s*:\s*"([^"]+)"', text)
        line = f"HTTP {status.group(1).strip()}" + (f" {code.group(1)}" if code else "") + (
            f": {message.group(1).strip()}" if message else "")
    else:
        line = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return line if len(line) <= 400 else line[:400] + "..."


def translate_obstore(exc: BaseException, key: str, op: str, service: str) -> NczfsError:
    """One obstore failure as an nczfs exception naming the key, the request and the cause."""
    if isinstance(exc, NczfsError):
        return exc
    if isinstance(exc, FileNotFoundError):
        return KeyNotFound(key)
    if isinstance(exc, (PreconditionError, AlreadyExistsError)):  # a GET's If-Match, a PUT's condition
        return Stale(f"{key!r}: the object changed in {service} while open")
    if isinstance(exc, (PermissionDeniedError, UnauthenticatedError)):
        return PermissionDenied(f"{key!r}: {service} {op} refused: {first_line(exc)}")
    if isinstance(exc, ValueError) and "parse path" in str(exc).lower():
        return InvalidKey(key, f"{service} cannot name this key: {first_line(exc)}")
    text = str(exc)
    if "KeyTooLong" in text:
        return NameTooLong(f"{key!r}: {service} {op} refused: key too long")
    if " 403 " in text or "AccessDenied" in text:
        return PermissionDenied(f"{key!r}: {service} {op} refused: {first_line(exc)}")
    return BackendError(f"{key!r}: {service} {op} failed: {first_line(exc)}")


def other_version(result: Any, options: Mapping[str, Any], key: str) -> Stale | None:
    """obstore's answer ``result`` to a GET sent with ``options``: :func:`answered_other` of the
    ``If-Match`` it carried (the answer's metadata is read only where it carried one)."""
    pin = options.get("if_match")
    return None if pin is None else answered_other(key, pin, result.meta.get("e_tag"))


def answered_other(key: str, pin: str | None, got: str | None) -> Stale | None:
    """A GET pinned to version ``pin`` (the ``If-Match`` it sent; None: not pinned) that the
    server answered with version ``got``: Stale where the two differ. A server that ignores the
    condition, or checks it apart from the read (another writer's version stored between the
    two), must not have the other version's bytes taken for the pinned one's (cached under its
    ETag, cut at its size)."""
    if pin is None or not got or got.removeprefix("W/").strip('"') == pin.strip('"'):  # the same tag, weak (a compressed answer) or not
        return None
    return Stale(f"{key!r}: version {pin} was asked for, the server answered with version {got}")


def unsatisfiable(exc: BaseException) -> bool:
    text = str(exc)
    return "416" in text or "InvalidRange" in text or "Range Not Satisfiable" in text or "range is not satisfiable" in text.lower()


def unnamable(exc: BaseException) -> bool:
    """A failure because obstore cannot name a key (a control character in it, as S3 allows)."""
    return isinstance(exc, (InvalidPathError, ValueError)) and "path" in str(exc).lower()


#: obstore's (reqwest's) words for a request that never reached the server: it is certainly not carried out
NOT_SENT = re.compile(r"tcp connect error|ConnectError|Connection refused|dns error|failed to lookup address", re.I)
#: obstore's words for an answer: an HTTP status came back
ANSWERED = re.compile(r"status code: \d{3}|Client error with status|Server error with status", re.I)


def unanswered(exc: BaseException) -> bool:
    """obstore's request went out and no answer came (a timeout, a broken connection): what it
    asked may still be carried out. Not so for one refused before it was sent, or answered."""
    text = str(exc)
    return not ANSWERED.search(text) and not NOT_SENT.search(text)


#: an answer that a later attempt may change (a server error)
SERVER_ERROR = re.compile(r"status code: 5\d\d|Server error with status")

# ---------------------------------------------------------------------- boto3

NOT_FOUND = {"NoSuchKey", "404", "NotFound"}
DENIED = {"AccessDenied", "403", "Forbidden", "AllAccessDisabled", "InvalidAccessKeyId", "SignatureDoesNotMatch"}
#: writes whose request, sent without an answer, may still be carried out by the server
WRITES = frozenset({"PutObject", "CompleteMultipartUpload", "CreateMultipartUpload"})
#: botocore's failures after a request went out: no answer came (a timeout, a broken connection)
UNANSWERED = (botocore.exceptions.ReadTimeoutError, botocore.exceptions.ConnectionClosedError)


#: S3's answers to a request whose condition (If-Match, If-None-Match) does not hold; AWS
#: answers 409 ConditionalRequestConflict while another conditional write of the key is under way
CONDITION_FAILED = frozenset({"PreconditionFailed", "412", "ConditionalRequestConflict"})


def code_of(exc: botocore.exceptions.ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def message_of(exc: Exception) -> str:
    if isinstance(exc, botocore.exceptions.ClientError):
        err = exc.response.get("Error", {})
        return f"{err.get('Code', '?')}: {err.get('Message', '')}".rstrip(": ")
    return str(exc) or type(exc).__name__


def upload_gone(exc: Exception) -> bool:
    """Is this the answer about an upload that is no longer there (completed or aborted)?"""
    return isinstance(exc, botocore.exceptions.ClientError) and code_of(exc) in ("NoSuchUpload", "404")


def translate_boto(exc: Exception, key: str, op: str) -> NczfsError:
    """One S3/botocore failure as an nczfs exception naming the key, the operation and the S3 error."""
    if isinstance(exc, NczfsError):
        return exc
    if isinstance(exc, UNANSWERED) and op in WRITES:
        return OutcomeUnknown(f"{key!r}: S3 {op} got no answer ({message_of(exc)}); it may still be carried out "
                              "(outcome unknown)")
    if isinstance(exc, botocore.exceptions.ClientError):
        code = code_of(exc)
        if code in NOT_FOUND:
            return KeyNotFound(key)
        if code in DENIED:
            return PermissionDenied(f"{key!r}: S3 {op} refused: {message_of(exc)}")
        if code == "KeyTooLongError":
            return NameTooLong(f"{key!r}: S3 {op} refused: {message_of(exc)}")
        if code in CONDITION_FAILED:
            return Stale(f"{key!r}: the object changed in S3 while open")
    return BackendError(f"{key!r}: S3 {op} failed: {message_of(exc)}")
