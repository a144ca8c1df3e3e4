"""The XSpace protobuf schema (``xplane.proto`` of XLA/TSL profiler), built at run time.

No TensorFlow and no generated code: the message descriptors are declared below and compiled by
the ``protobuf`` runtime (upb, C), which does the parsing. Field numbers follow the published
schema (openxla/xla ``xla/tsl/profiler/protobuf/xplane.proto``):

    XSpace   { repeated XPlane planes = 1; repeated string errors = 2; warnings = 3; hostnames = 4; }
    XPlane   { int64 id = 1; string name = 2; repeated XLine lines = 3;
               map<int64, XEventMetadata> event_metadata = 4; map<int64, XStatMetadata> stat_metadata = 5;
               repeated XStat stats = 6; }
    XLine    { int64 id = 1; int64 display_id = 10; string name = 2; string display_name = 11;
               int64 timestamp_ns = 3; int64 duration_ps = 9; repeated XEvent events = 4; }
    XEvent   { int64 metadata_id = 1; oneof { int64 offset_ps = 2; int64 num_occurrences = 5; }
               int64 duration_ps = 3; repeated XStat stats = 4; }
    XStat    { int64 metadata_id = 1; oneof { double double_value = 2; uint64 uint64_value = 3;
               int64 int64_value = 4; string str_value = 5; bytes bytes_value = 6; uint64 ref_value = 7; } }
    XEventMetadata { int64 id = 1; string name = 2; string display_name = 4; bytes metadata = 3;
               repeated XStat stats = 5; repeated int64 child_id = 6; }
    XStatMetadata  { int64 id = 1; string name = 2; string description = 3; }

Strings are declared ``bytes`` so that invalid UTF-8 in a real file (it happens) does not abort the
parse; readers decode them with replacement.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

_I64, _U64, _DBL, _BYTES, _MSG = 3, 4, 1, 12, 11  # FieldDescriptorProto.Type
_OPT, _REP = 1, 3  # labels

_MESSAGES: dict[str, list[tuple[str, int, int, int, str | None, int | None]]] = {
    # name, number, type, label, message type, oneof index
    "XSpace": [
        ("planes", 1, _MSG, _REP, "XPlane", None),
        ("errors", 2, _BYTES, _REP, None, None),
        ("warnings", 3, _BYTES, _REP, None, None),
        ("hostnames", 4, _BYTES, _REP, None, None),
    ],
    "XPlane": [
        ("id", 1, _I64, _OPT, None, None),
        ("name", 2, _BYTES, _OPT, None, None),
        ("lines", 3, _MSG, _REP, "XLine", None),
        ("event_metadata", 4, _MSG, _REP, "XPlane.EventMetadataEntry", None),
        ("stat_metadata", 5, _MSG, _REP, "XPlane.StatMetadataEntry", None),
        ("stats", 6, _MSG, _REP, "XStat", None),
    ],
    "XLine": [
        ("id", 1, _I64, _OPT, None, None),
        ("display_id", 10, _I64, _OPT, None, None),
        ("name", 2, _BYTES, _OPT, None, None),
        ("display_name", 11, _BYTES, _OPT, None, None),
        ("timestamp_ns", 3, _I64, _OPT, None, None),
        ("duration_ps", 9, _I64, _OPT, None, None),
        ("events", 4, _MSG, _REP, "XEvent", None),
    ],
    "XEvent": [
        ("metadata_id", 1, _I64, _OPT, None, None),
        ("offset_ps", 2, _I64, _OPT, None, 0),
        ("num_occurrences", 5, _I64, _OPT, None, 0),
        ("duration_ps", 3, _I64, _OPT, None, None),
        ("stats", 4, _MSG, _REP, "XStat", None),
    ],
    "XStat": [
        ("metadata_id", 1, _I64, _OPT, None, None),
        ("double_value", 2, _DBL, _OPT, None, 0),
        ("uint64_value", 3, _U64, _OPT, None, 0),
        ("int64_value", 4, _I64, _OPT, None, 0),
        ("str_value", 5, _BYTES, _OPT, None, 0),
        ("bytes_value", 6, _BYTES, _OPT, None, 0),
        ("ref_value", 7, _U64, _OPT, None, 0),
    ],
    "XEventMetadata": [
        ("id", 1, _I64, _OPT, None, None),
        ("name", 2, _BYTES, _OPT, None, None),
        ("display_name", 4, _BYTES, _OPT, None, None),
        ("metadata", 3, _BYTES, _OPT, None, None),
        ("stats", 5, _MSG, _REP, "XStat", None),
        ("child_id", 6, _I64, _REP, None, None),
    ],
    "XStatMetadata": [
        ("id", 1, _I64, _OPT, None, None),
        ("name", 2, _BYTES, _OPT, None, None),
        ("description", 3, _BYTES, _OPT, None, None),
    ],
}
_ONEOF = {"XEvent": "data", "XStat": "value"}
_PKG = "stepscope.xspace"


@lru_cache(maxsize=1)
def xspace_class() -> Any:
    """The XSpace message class (``XSpace.FromString(data)``)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fd = descriptor_pb2.FileDescriptorProto(name="stepscope_xspace.proto", package=_PKG, syntax="proto3")
    for name, fields in _MESSAGES.items():
        msg = fd.message_type.add(name=name)
        if name in _ONEOF:
            msg.oneof_decl.add(name=_ONEOF[name])
        for fname, num, ftype, label, mtype, oneof in fields:
            f = msg.field.add(name=fname, number=num, type=ftype, label=label)
            if mtype:
                f.type_name = f".{_PKG}.{mtype}"
            if oneof is not None:
                f.oneof_index = oneof
        if name == "XPlane":
            for entry, value in (("EventMetadataEntry", "XEventMetadata"), ("StatMetadataEntry", "XStatMetadata")):
                e = msg.nested_type.add(name=entry)
                e.options.map_entry = True
                e.field.add(name="key", number=1, type=_I64, label=_OPT)
                e.field.add(name="value", number=2, type=_MSG, label=_OPT, type_name=f".{_PKG}.{value}")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PKG}.XSpace"))
