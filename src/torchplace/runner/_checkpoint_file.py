"""Checkpoint files on disk: written atomically, sealed with a SHA-256, read strictly.

A checkpoint file is what ``torch.save`` writes (a zip archive that ``torch.load`` and
``unzip`` read as it is) with a seal in the archive comment, the last bytes of the file::

    torchplace checkpoint 2; data full; sha256 of 16 MiB blocks <64 hex digits>

The digest covers every byte of the file before its own 64 digits: the records, their local
headers and data descriptors, the central directory, the end records and the seal's text.
It is the SHA-256 of the SHA-256s of those bytes' 16 MiB blocks, so that the blocks are
hashed on several cores at once (SHA-256 runs at about 1 GB/s per core).

Zip's own CRC-32 per record covers a record's data but not the bytes that say where a
record starts, how long it is, what it is called or whether it is a directory: flipping
a record's directory bit made ``torch.load`` skip its data without an error (the tensor kept
whatever its new memory held, usually zeros).
The seal is checked before anything is unpickled, on the same open file that ``torch.load``
then reads, so what was verified is what is loaded. ``data none`` marks a file that
``torchplace sim`` wrote with placeholder values (tensor metadata only, see
``torchplace.sim.emulation._files``): it is read only inside that simulation.

The seal detects damage, not tampering: whoever can write the file can seal it again (what
keeps a hostile file from running code is ``weights_only=True``).

Format 1 files (torchplace before the seal: ``torch.save`` of the same payload, no archive
comment) are still read, with every check that format allows: the end records, every
central-directory entry against its local header and data descriptor, records that follow
each other without gaps, are stored uncompressed, are not marked as directories, have
unique names, and pass their CRC-32.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import os
import pickle
import re
import stat
import struct
import tempfile
import threading
import zipfile
from pathlib import Path
from typing import IO, Any

import torch

__all__ = ["FORMAT", "VERSION", "damaged", "read", "write_atomic"]

FORMAT = "torchplace.checkpoint"  # the payload's marker
VERSION = 2  # the format written; format 1 is read too
_TMP_MARK = ".tmp-"
_SEAL = re.compile(
    rb"torchplace checkpoint (\d+); data (full|none); sha256 of 16 MiB blocks ([0-9a-f]{64})"
)
_SEAL_MAGIC = b"torchplace checkpoint "
_DIGITS = 64
_BLOCK = 16 << 20  # the digest's block: a whole number of _CHUNKs
_CHUNK = 4 << 20  # what one read takes

# zip records (APPNOTE.TXT 4.3): signatures and fixed sizes
_LOCAL = b"PK\x03\x04"
_DESCRIPTOR = b"PK\x07\x08"
_END = b"PK\x05\x06"
_END_SIZE = 22
_ZIP64_END = b"PK\x06\x06"
_ZIP64_END_SIZE = 56
_ZIP64_LOCATOR = b"PK\x06\x07"
_ZIP64_LOCATOR_SIZE = 20
_MAX_COMMENT = 0xFFFF
_NAME = re.compile(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)+")


# --- writing ----------------------------------------------------------------------------


def write_atomic(path: Path, payload: Any, *, placeholder: bool) -> None:
    """``torch.save`` ``payload`` to ``path`` sealed (see the module docstring), atomically:
    a temporary file in the same directory, flushed and fsync-ed, renamed over ``path``."""
    directory = path.absolute().parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise RuntimeError(f"cannot create the directory {directory} for {path}: {e}") from e
    _remove_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}{_TMP_MARK}{os.getpid()}-")
    try:
        with os.fdopen(fd, "w+b") as f:
            torch.save(payload, f)
            _seal(f, placeholder=placeholder)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise RuntimeError(
                f"could not write the checkpoint {path}: {e}. The previous checkpoint, if "
                f"any, is untouched."
            ) from e
        raise
    _fsync_directory(directory)


def _seal(f: IO[bytes], *, placeholder: bool) -> None:
    end = f.seek(0, os.SEEK_END)
    f.seek(end - _END_SIZE)
    record = f.read(_END_SIZE)
    if record[:4] != _END or record[-2:] != b"\0\0":  # torch.save writes no archive comment
        raise RuntimeError(
            f"torch {torch.__version__} wrote a zip end record that torchplace does not know "
            f"({record.hex()}), so the checkpoint cannot be sealed: please report this."
        )
    data = "none" if placeholder else "full"
    text = f"torchplace checkpoint {VERSION}; data {data}; sha256 of 16 MiB blocks "
    seal = text.encode()
    f.seek(end - 2)
    f.write(struct.pack("<H", len(seal) + _DIGITS))  # the end record's comment length
    f.write(seal)
    digest = _digest(f, end + len(seal))
    f.seek(end + len(seal))
    f.write(digest.encode())


def _remove_stale_temporaries(path: Path) -> None:
    """Remove temporary files of this checkpoint whose writer process no longer exists."""
    directory = path.absolute().parent
    prefix = f".{path.name}{_TMP_MARK}"
    for name in os.listdir(directory):
        pid = name[len(prefix) :].split("-", 1)[0] if name.startswith(prefix) else ""
        if pid.isdigit() and not _process_alive(int(pid)):
            with contextlib.suppress(OSError):
                os.unlink(directory / name)


def _process_alive(pid: int) -> bool:
    if os.name != "posix":
        return True  # no cheap liveness check: keep the file
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable (POSIX); Windows cannot open a directory for this."""
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- reading ----------------------------------------------------------------------------


def damaged(path: Path, size: int, what: str) -> ValueError:
    """The one error for a file whose bytes are not what ``save`` wrote."""
    return ValueError(
        f"the checkpoint {path} ({size} bytes) is damaged: {what}. It was cut short (a copy "
        f"interrupted, a full disk) or changed after it was written, or it is not a PyTorch "
        f"checkpoint; nothing was loaded. Load an earlier checkpoint or start again."
    )


def read(
    path: Path, map_location: str | torch.device, *, placeholder: bool
) -> tuple[dict[str, Any], int]:
    """The payload of the checkpoint ``path`` (a dict with the right format marker) and its
    format version, after every check the format allows. ``placeholder``: the file was
    written by this simulation with placeholder values (no data to check or read).

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: damaged, not a torchplace checkpoint, or from a newer torchplace.
    """
    if not path.is_file():
        what = "is a directory, not a file" if path.is_dir() else "does not exist"
        raise FileNotFoundError(
            f"no checkpoint at {path} ({path.absolute()} {what}): check the path, or start "
            f"from scratch when no checkpoint was saved yet (if os.path.exists(path): load(...))."
        )
    with open(path, "rb") as f:  # one open file: what is checked is what torch.load reads
        size = os.fstat(f.fileno()).st_size
        seal = _find_seal(path, f, size)
        if seal is None:
            problem = _check_zip(f, size, test_crc=not placeholder)
            if problem is not None:
                raise damaged(path, size, problem)
            version = 1
        else:
            version, (data, digest) = VERSION, seal
            if _digest(f, size - _DIGITS) != digest:
                raise damaged(
                    path,
                    size,
                    "its SHA-256 differs from the one sealed in it when it was written, so "
                    "some of its bytes changed since",
                )
            if data == "none" and not placeholder:
                raise ValueError(
                    f"{path} was written by `torchplace sim` with placeholder values: it holds "
                    f"the tensors' shapes but no data, so it cannot be loaded as a checkpoint. "
                    f"Load it in the simulated run that wrote it, or save one from a real run "
                    f"(or a simulation with --values real)."
                )
        f.seek(0)
        payload = _torch_load(path, f, size, map_location, sealed=seal is not None)
    return _check_header(path, size, payload, version), version


def _find_seal(path: Path, f: IO[bytes], size: int) -> tuple[str, str] | None:
    """The seal's data kind and digest; None when the file has no archive comment."""
    f.seek(max(0, size - _END_SIZE - _MAX_COMMENT))
    tail = f.read()
    at = tail.rfind(_END)  # the end record is followed by its comment, then the file ends
    while at >= 0:
        if at + _END_SIZE <= len(tail):
            comment_length = struct.unpack_from("<H", tail, at + 20)[0]
            if at + _END_SIZE + comment_length == len(tail):
                break
        at = tail.rfind(_END, 0, at)
    if at < 0:  # cut short, damaged, or not a zip archive
        if _SEAL_MAGIC in tail:
            raise damaged(path, size, "its zip end record, before the seal, is damaged")
        return None
    comment = tail[at + _END_SIZE :]
    if not comment:
        return None
    named = re.match(rb"torchplace checkpoint (\d+);", comment)
    if named is not None and int(named[1]) > VERSION:
        raise _newer(path, int(named[1]))
    match = _SEAL.fullmatch(comment)
    if match is None or int(match[1]) != VERSION:
        raise damaged(
            path,
            size,
            f"its archive comment, where torchplace keeps the file's seal, holds {comment[:100]!r}",
        )
    return match[2].decode(), match[3].decode()


def _newer(path: Path, version: int) -> ValueError:
    return ValueError(
        f"{path} says it was written by a newer torchplace (checkpoint format {version}; this "
        f"one reads formats 1 to {VERSION}): upgrade torchplace (pip install -U torchplace). "
        f"If no newer torchplace wrote it, the file is damaged."
    )


def _digest(f: IO[bytes], length: int) -> str:
    """The seal's digest of the first ``length`` bytes of ``f`` (64 hex digits): the SHA-256
    of the SHA-256s of their 16 MiB blocks, hashed in threads (hashlib releases the GIL)."""
    f.flush()
    starts = range(0, length, _BLOCK)
    workers = min(len(starts), os.cpu_count() or 1, 8)
    lock = threading.Lock()

    def block(start: int) -> bytes:
        digest = hashlib.sha256()
        for at in range(start, min(start + _BLOCK, length), _CHUNK):
            digest.update(_read_at(f, at, min(_CHUNK, length - at), lock))
        return digest.digest()

    if workers <= 1:
        parts = [block(start) for start in starts]
    else:
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            parts = list(pool.map(block, starts))
    return hashlib.sha256(b"".join(parts)).hexdigest()


def _read_at(f: IO[bytes], at: int, size: int, lock: threading.Lock) -> bytes:
    if hasattr(os, "pread"):  # POSIX: threads read the one open file without seeking it
        return os.pread(f.fileno(), size, at)
    with lock:
        f.seek(at)
        return f.read(size)


def _torch_load(
    path: Path, f: IO[bytes], size: int, map_location: str | torch.device, *, sealed: bool
) -> Any:
    try:
        return torch.load(f, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        raise ValueError(
            f"{path} holds objects that torch.load(weights_only=True) refuses to rebuild, "
            f"so it was not written by torchplace.save. If you trust the file, read it with "
            f"torch.load(path, weights_only=False). ({str(e).splitlines()[-1]})"
        ) from e
    except Exception as e:
        if sealed:  # the bytes are those written: this machine cannot read them this way
            raise ValueError(
                f"the checkpoint {path} is intact (its SHA-256 matches its seal), but "
                f"torch.load could not read it here ({type(e).__name__}: {e}). If "
                f"map_location={map_location!r} names a device this machine lacks, pass "
                f"another one (the default, the CPU, always works)."
            ) from e
        raise damaged(path, size, f"torch.load failed ({type(e).__name__}: {e})") from e


def _check_header(path: Path, size: int, payload: Any, version: int) -> dict[str, Any]:
    if not (isinstance(payload, dict) and payload.get("format") == FORMAT):
        kind = type(payload).__name__
        keys = f" with keys {sorted(map(str, payload))[:8]}" if isinstance(payload, dict) else ""
        raise ValueError(
            f"{path} is a PyTorch file (a {kind}{keys}) but not a torchplace checkpoint: read "
            f"it with torch.load(path, weights_only=True) and load_state_dict() yourself."
        )
    saved = payload.get("version")
    if saved == version:
        return payload
    if isinstance(saved, int) and not isinstance(saved, bool) and saved > VERSION:
        raise _newer(path, saved)
    if saved == VERSION:  # written sealed, read without its seal
        raise damaged(
            path,
            size,
            f"it was written as format {VERSION}, whose seal (the archive comment at the end "
            f"of the file) is missing: the file was cut short or rewritten by another tool",
        )
    raise damaged(path, size, f"it names checkpoint format {saved!r}, not one torchplace writes")


# --- format 1: the zip structure, strictly ----------------------------------------------


def _check_zip(f: IO[bytes], size: int, *, test_crc: bool) -> str | None:
    """What in the zip archive ``f`` is not as ``torch.save`` writes it, or None."""
    try:
        with zipfile.ZipFile(f) as archive:
            return _zip_problem(archive, f, size, test_crc=test_crc)
    except Exception as e:  # a damaged directory raises anything, UnicodeDecodeError included
        return f"it is not a complete zip archive ({type(e).__name__}: {e})"


def _zip_problem(
    archive: zipfile.ZipFile, f: IO[bytes], size: int, *, test_crc: bool
) -> str | None:
    infos = sorted(archive.infolist(), key=lambda i: i.header_offset)
    if not infos:
        return "its zip archive holds no records"
    problem = _check_end(f, size, archive.start_dir, len(infos))
    at, names = 0, set[str]()
    for info in infos:  # in file order: each record starts where the one before ends
        if problem is None:
            problem, at = _check_record(f, info, at, names)
    if problem is not None:
        return problem
    if at != archive.start_dir:
        return f"bytes {at} to {archive.start_dir}, before the central directory, are no record's"
    bad = archive.testzip() if test_crc else None
    return None if bad is None else f"the record {bad!r} fails its CRC-32 check"


def _check_end(f: IO[bytes], size: int, start: int, count: int) -> str | None:
    f.seek(size - _END_SIZE)
    fields = struct.unpack("<4sHHHHLLH", f.read(_END_SIZE))
    _, disk, directory_disk, on_disk, total, directory_size, directory_at, _ = fields
    directory_end = size - _END_SIZE
    f.seek(max(0, size - _END_SIZE - _ZIP64_LOCATOR_SIZE))
    locator = f.read(_ZIP64_LOCATOR_SIZE)
    if locator[:4] == _ZIP64_LOCATOR:
        _, end_disk, end_at, disks = struct.unpack("<4sLQL", locator)
        f.seek(end_at)
        record = f.read(_ZIP64_END_SIZE)
        if (
            len(record) != _ZIP64_END_SIZE
            or record[:4] != _ZIP64_END
            or end_at + _ZIP64_END_SIZE != size - _END_SIZE - _ZIP64_LOCATOR_SIZE
            or (end_disk, disks) != (0, 1)
        ):
            return "its zip64 end records are inconsistent"
        wide = struct.unpack("<4sQHHLLQQQQ", record)
        if wide[1] != _ZIP64_END_SIZE - 12 or wide[4:6] != (0, 0):
            return "its zip64 end record is inconsistent"
        for narrow, value, marker in zip(
            (on_disk, total, directory_size, directory_at),
            wide[6:],
            (0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF),
            strict=True,
        ):
            if narrow not in (marker, value):
                return "its zip end record and zip64 end record disagree"
        on_disk, total, directory_size, directory_at = wide[6:]
        directory_end = end_at
    if (disk, directory_disk) != (0, 0):
        return "its end record names another disk"
    if on_disk != count or total != count:
        return f"its end record counts {total} records, its central directory holds {count}"
    if directory_at != start or directory_at + directory_size != directory_end:
        return (
            f"its end record places the central directory at bytes {directory_at} to "
            f"{directory_at + directory_size}, where bytes {start} to {directory_end} hold it"
        )
    return None


def _check_record(
    f: IO[bytes], info: zipfile.ZipInfo, at: int, names: set[str]
) -> tuple[str | None, int]:
    """What is wrong with the record that should start at ``at``, and where it ends."""
    name = info.orig_filename
    record = f"the record {name!r}"
    if name in names:
        return f"{record} appears twice", at
    names.add(name)
    if not _NAME.fullmatch(name):
        return f"it has a record named {name!r}, not a name torch.save writes", at
    if info.flag_bits & 0x41:
        return f"{record} is marked as encrypted", at
    if info.compress_type != zipfile.ZIP_STORED:
        return f"{record} is marked as compressed (method {info.compress_type})", at
    if info.compress_size != info.file_size:
        return f"{record} has two sizes ({info.compress_size} and {info.file_size} bytes)", at
    if info.external_attr & 0x10 or stat.S_ISDIR(info.external_attr >> 16):
        return f"{record} is marked as a directory", at  # torch would read it as empty
    if info.volume != 0 or info.comment:
        return f"{record} has a disk number or comment that torch.save does not write", at
    if info.header_offset != at:
        return f"{record} starts at byte {info.header_offset}, the one before ends at {at}", at
    f.seek(at)
    header = f.read(30)
    if len(header) != 30 or header[:4] != _LOCAL:
        return f"{record} has no local header at byte {at}", at
    flags, method = struct.unpack("<HH", header[6:10])
    name_length, extra_length = struct.unpack("<HH", header[26:30])
    if (flags, method) != (info.flag_bits, info.compress_type):
        return f"{record}'s local header and central directory entry disagree", at
    if f.read(name_length) != name.encode("utf-8" if flags & 0x800 else "cp437"):
        return f"{record}'s local header names another record", at
    end = at + 30 + name_length + extra_length + info.compress_size
    if flags & 0x08:  # a data descriptor follows the data: signature, CRC-32, two sizes
        wide = at >= 0xFFFFFFFF or info.file_size >= 0xFFFFFFFF  # zip64, as torch writes it
        layout = "<4sLQQ" if wide else "<4sLLL"
        f.seek(end)
        descriptor = f.read(struct.calcsize(layout))
        expected = (_DESCRIPTOR, info.CRC, info.compress_size, info.file_size)
        if len(descriptor) != struct.calcsize(layout) or (
            struct.unpack(layout, descriptor) != expected
        ):
            return f"{record}'s data descriptor and central directory entry disagree", at
        end += struct.calcsize(layout)
    elif struct.unpack("<LLL", header[14:26]) != (info.CRC, info.compress_size, info.file_size):
        return f"{record}'s local header and central directory entry disagree", at
    return None, end
