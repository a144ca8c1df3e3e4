"""The parts of a rocprofv3 JSON document stepscope reads, as msgspec structs (field names from
rocprofiler-sdk's cereal serializers, ``cxx/serialization/save.hpp``); every other field is
ignored. Times and ids are bounded (``_Time``, ``_Id``) so that a damaged value fails its record,
not the sums of the analyses."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

_Time = Annotated[int, msgspec.Meta(ge=0, lt=2**62)]
_Id = Annotated[int, msgspec.Meta(ge=-(2**62), lt=2**62)]


class Handle(msgspec.Struct, gc=False, frozen=True):
    handle: _Id = -1


class Corr(msgspec.Struct, gc=False, frozen=True):
    internal: _Id = -1


class Info(msgspec.Struct, gc=False, frozen=True):
    agent_id: Handle = Handle()
    queue_id: Handle = Handle()
    kernel_id: _Id = -1


class Dispatch(msgspec.Struct, gc=False, frozen=True):
    start_timestamp: _Time
    end_timestamp: _Time
    dispatch_info: Info
    thread_id: _Id = -1
    correlation_id: Corr = Corr()
    stream_id: Handle | None = None


class Api(msgspec.Struct, gc=False, frozen=True):
    """An API call or a roctx range (``hip_api``, ``hsa_api``, ``rccl_api``, ``marker_api``)."""

    start_timestamp: _Time
    end_timestamp: _Time
    kind: _Id = -1
    operation: _Id = -1
    thread_id: _Id = -1
    correlation_id: Corr = Corr()


class Copy(Api, frozen=True):
    """A memory copy: an API record's fields and its agents, bytes and stream."""

    dst_agent_id: Handle = Handle()
    src_agent_id: Handle = Handle()
    bytes: _Id = -1
    stream_id: Handle | None = None


class KindOps(msgspec.Struct, gc=False, frozen=True):
    kind: str = ""
    operations: list[str] = []


class Message(msgspec.Struct, gc=False, frozen=True):
    key: _Id = -1
    value: str = ""


class Strings(msgspec.Struct, gc=False, frozen=True):
    buffer_records: list[KindOps] = []
    marker_api: list[Message] = []


class Symbol(msgspec.Struct, gc=False, frozen=True):
    kernel_id: _Id = -1
    kernel_name: str = ""
    formatted_kernel_name: str = ""
    truncated_kernel_name: str = ""


EMPTY = msgspec.Raw(b"[]")


class Buffers(msgspec.Struct, gc=False, frozen=True):
    kernel_dispatch: msgspec.Raw = EMPTY
    memory_copy: msgspec.Raw = EMPTY
    hip_api: msgspec.Raw = EMPTY
    hsa_api: msgspec.Raw = EMPTY
    rccl_api: msgspec.Raw = EMPTY
    marker_api: msgspec.Raw = EMPTY


class Meta(msgspec.Struct, gc=False, frozen=True):
    pid: _Id = 0


class Process(msgspec.Struct, gc=False, frozen=True):
    metadata: Meta = Meta()
    agents: msgspec.Raw = EMPTY
    strings: Strings = Strings()
    kernel_symbols: msgspec.Raw = EMPTY
    buffer_records: Buffers = Buffers()


class Doc(msgspec.Struct, gc=False, frozen=True):
    processes: list[Process] = msgspec.field(name="rocprofiler-sdk-tool", default=[])


def records(raw: msgspec.Raw, kind: type[Any]) -> tuple[list[Any], int]:
    """The records of one list, and how many were skipped for fields of the wrong type (the rest
    decoded one at a time then, so a damaged record costs only itself)."""
    try:
        return msgspec.json.decode(raw, type=list[kind]), 0  # type: ignore[valid-type]
    except msgspec.ValidationError:
        pass
    try:
        items = msgspec.json.decode(raw, type=list[msgspec.Raw])
    except msgspec.ValidationError:  # not a list at all: a damaged document, none of it usable
        return [], 1
    out, bad = [], 0
    for one in items:
        try:
            out.append(msgspec.json.decode(one, type=kind))
        except msgspec.ValidationError:
            bad += 1
    return out, bad
