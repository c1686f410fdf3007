"""Repair a rosbag2 MCAP bag whose recorder was killed: rebuild its summary and ``metadata.yaml``.

``ros2 bag record`` (and :class:`~vid2sid_ros.io.rosbag.BagWriter`) write the MCAP summary
(chunk index, statistics, footer) and ``metadata.yaml`` only when they close. After a
SIGKILL or a power loss the bag has neither, but every *completed* chunk on disk is
intact (the recorder of this package closes a chunk and fsyncs at every trial end).
:func:`repair_bag` reads the unfinished file record by record with the ``mcap``
library's stream reader (schemas, channels and messages, also inside chunks), stops at the
first incomplete record, and writes

* a complete MCAP file (same schemas, channels with their ``offered_qos_profiles``
  metadata, every recovered message with its log/publish time and sequence), zstd chunks,
  through ``mcap.writer.Writer``;
* ``metadata.yaml`` (rosbag2 version 9: message counts, start and duration, per topic the
  type, the type hash ``RIHS01_...`` and the offered QoS profiles).

Nothing is lost or written over: the unfinished file is kept beside the repaired one as
``<name>.mcap.unfinished``. sqlite3 (``.db3``) bags are not repaired (SQLite journals its
own writes; only ``metadata.yaml`` would be missing) — the error says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .rosbag import MCAP_MAGIC, BagError, bag_storage_files, make_typestore

__all__ = ["RepairReport", "repair_bag", "recover_records"]


@dataclass
class RepairReport:
    """What :func:`repair_bag` did.

    Attributes:
        bag: the bag directory.
        files: repaired storage files (``name.mcap``), with the kept originals ``name.mcap.unfinished``.
        messages: recovered messages per topic.
        dropped_bytes: bytes after the last complete record (the lost, unfinished chunk).
        start_ns, end_ns: first and last log time, ns.
        already_finished: True when the storage was complete (only ``metadata.yaml`` rebuilt, or nothing).
    """

    bag: Path
    files: list[Path] = field(default_factory=list)
    messages: dict[str, int] = field(default_factory=dict)
    dropped_bytes: int = 0
    start_ns: int = 0
    end_ns: int = 0
    already_finished: bool = False

    def summary(self) -> str:
        """One line for the terminal."""
        n = sum(self.messages.values())
        per = ", ".join(f"{t}: {c}" for t, c in sorted(self.messages.items()))
        if self.already_finished:
            return f"bag {self.bag}: already finished; metadata.yaml checked ({n} messages)"
        return (f"bag {self.bag} repaired: {n} messages recovered ({per}); {self.dropped_bytes} bytes of an unfinished "
                f"chunk dropped; originals kept as " + ", ".join(f"{f.name}.unfinished" for f in self.files))


def recover_records(path: str | Path) -> tuple[dict[int, Any], dict[int, Any], list[Any], int]:
    """Schemas, channels and messages readable from a (possibly truncated) MCAP file.

    Returns:
        ``(schemas {id: Schema}, channels {id: Channel}, messages [Message], bytes_after_last_good_record)``.

    Raises:
        BagError: the file does not start with the MCAP magic.
    """
    from mcap.records import Channel, Message, Schema
    from mcap.stream_reader import StreamReader

    p = Path(path)
    size = p.stat().st_size
    with p.open("rb") as fh:
        if fh.read(len(MCAP_MAGIC)) != MCAP_MAGIC:
            raise BagError(f"{p}: not an MCAP file (no MCAP magic at the start)")
        fh.seek(0)
        schemas: dict[int, Any] = {}
        channels: dict[int, Any] = {}
        messages: list[Any] = []
        reader = StreamReader(fh, emit_chunks=False, validate_crcs=True)
        good = len(MCAP_MAGIC)
        try:
            for rec in reader.records:
                if isinstance(rec, Schema):
                    schemas[rec.id] = rec
                elif isinstance(rec, Channel):
                    channels[rec.id] = rec
                elif isinstance(rec, Message):
                    messages.append(rec)
                good = fh.tell()
        except Exception:  # noqa: BLE001 - the truncated tail: EndOfFile, a short record, a bad CRC
            pass
    return schemas, channels, messages, max(size - good, 0)


def _metadata(bag: Path, files: list[Path], schemas, channels, messages, counts: dict[int, int]) -> dict:
    from ..core.yamlio import YAMLInputError, loads_yaml

    store = make_typestore()
    start = min((m.log_time for m in messages), default=0)
    end = max((m.log_time for m in messages), default=0)
    topics = []
    for cid, ch in sorted(channels.items()):
        schema = schemas.get(ch.schema_id)
        msgtype = schema.name if schema is not None else ""
        qos_text = (ch.metadata or {}).get("offered_qos_profiles", "")
        try:
            qos = loads_yaml(qos_text, source=f"{bag}: channel {ch.topic} offered_qos_profiles") if qos_text else []
        except YAMLInputError:
            qos = []
        try:
            rihs = store.hash_rihs01(msgtype) if msgtype in store.fielddefs else ""
        except Exception:  # noqa: BLE001 - an unknown foreign type keeps an empty hash
            rihs = ""
        topics.append({"topic_metadata": {"name": ch.topic, "type": msgtype, "serialization_format":
                                          ch.message_encoding, "offered_qos_profiles": qos or [],
                                          "type_description_hash": rihs},
                       "message_count": int(counts.get(cid, 0))})
    n = sum(counts.values())
    return {"rosbag2_bagfile_information": {
        "version": 9, "storage_identifier": "mcap", "duration": {"nanoseconds": int(end - start)},
        "starting_time": {"nanoseconds_since_epoch": int(start)}, "message_count": int(n),
        "topics_with_message_count": topics, "compression_format": "", "compression_mode": "",
        "relative_file_paths": [f.name for f in files],
        "files": [{"path": f.name, "starting_time": {"nanoseconds_since_epoch": int(start)},
                   "duration": {"nanoseconds": int(end - start)}, "message_count": int(n)} for f in files],
        "custom_data": {"repaired_by": "vid2sid bag repair"}, "ros_distro": "kilted"}}


def repair_bag(path: str | Path) -> RepairReport:
    """Rebuild the MCAP summary and ``metadata.yaml`` of an unfinished bag (module docstring).

    Args:
        path: the bag directory (or its ``.mcap`` file).

    Returns:
        A :class:`RepairReport`.

    Raises:
        BagError: missing bag, no storage file, a sqlite3 bag, more than one MCAP file, a
            file that is not MCAP, nothing recoverable, or a directory that cannot be written.
    """
    import yaml
    from mcap.writer import CompressionType, Writer

    p = Path(path)
    if not p.exists():
        raise BagError(f"bag not found: {p}")
    bag = p if p.is_dir() else p.parent
    files = bag_storage_files(bag)
    if any(f.suffix == ".db3" for f in files):
        raise BagError(f"bag {bag}: sqlite3 storage; `vid2sid bag repair` rebuilds MCAP bags only (SQLite keeps its "
                       "own journal: re-index with `ros2 bag reindex`)")
    if not files:
        raise BagError(f"bag {bag}: no .mcap storage file to repair")
    if len(files) > 1:
        raise BagError(f"bag {bag}: {len(files)} MCAP files (split bag); repair one bag file at a time")
    f = files[0]
    with f.open("rb") as fh:
        fh.seek(max(f.stat().st_size - len(MCAP_MAGIC), 0))
        finished = fh.read() == MCAP_MAGIC
    schemas, channels, messages, dropped = recover_records(f)
    if not messages and not finished:
        raise BagError(f"bag {bag}: no complete message in {f.name} (the recorder died before its first chunk "
                       "was written); nothing to recover")
    counts: dict[int, int] = {}
    for m in messages:
        counts[m.channel_id] = counts.get(m.channel_id, 0) + 1
    report = RepairReport(bag, messages={channels[c].topic: n for c, n in counts.items() if c in channels},
                          dropped_bytes=0 if finished else dropped,
                          start_ns=min((m.log_time for m in messages), default=0),
                          end_ns=max((m.log_time for m in messages), default=0), already_finished=finished)
    try:
        if not finished:
            kept = f.with_name(f.name + ".unfinished")
            if kept.exists():
                raise BagError(f"bag {bag}: {kept.name} exists already (a previous repair?); move it away first")
            os.replace(f, kept)
            try:
                with f.open("xb") as out:
                    w = Writer(out, compression=CompressionType.ZSTD)
                    w.start(profile="ros2", library="vid2sid_ros bag repair")
                    sid = {i: w.register_schema(s.name, s.encoding, s.data) for i, s in sorted(schemas.items())}
                    cid = {i: w.register_channel(c.topic, c.message_encoding, sid.get(c.schema_id, 0),
                                                 dict(c.metadata or {})) for i, c in sorted(channels.items())}
                    for m in sorted(messages, key=lambda m: m.log_time):
                        if m.channel_id in cid:
                            w.add_message(cid[m.channel_id], m.log_time, m.data, m.publish_time, m.sequence)
                    w.finish()
                    out.flush()
                    os.fsync(out.fileno())
            except BaseException:
                if f.exists():
                    f.unlink()
                os.replace(kept, f)  # leave the bag as it was
                raise
            report.files.append(f)
        meta = bag / "metadata.yaml"
        if not finished or not meta.is_file():
            tmp = bag / ".metadata.yaml.tmp"
            tmp.write_text(yaml.safe_dump(_metadata(bag, [f], schemas, channels, messages, counts), sort_keys=False))
            os.replace(tmp, meta)
    except OSError as err:
        raise BagError(f"bag {bag}: cannot write the repaired files: {err.strerror or err}") from None
    return report
