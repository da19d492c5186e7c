"""Files a command writes for the user: checked before the work starts, written whole.

Examples:
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> path = os.path.join(folder, "report.html")
    >>> check_writable(path, "--html")
    >>> write_atomic(path, b"<html></html>")
    >>> open(path).read(), sorted(os.listdir(folder))
    ('<html></html>', ['report.html'])
    >>> try:
    ...     check_writable("/no-such-folder/r.html", "--html")
    ... except ValueError as e:
    ...     print(str(e).replace("; ", ";\\n"))
    --html /no-such-folder/r.html: the folder /no-such-folder does not exist;
    create it (mkdir -p /no-such-folder) or give a path in an existing folder.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["check_writable", "write_atomic"]


def check_writable(path: str | os.PathLike[str], flag: str) -> None:
    """Raise ValueError, naming ``flag`` and the fix, unless ``path`` can be written.

    Called before a long run, so a typo in an output path costs nothing.
    """
    p = Path(path)
    folder = p.parent.resolve()
    if p.is_dir():
        raise ValueError(f"{flag} {path}: that is a folder; give a file name, e.g. {p / 'out'}.")
    if not folder.is_dir():
        raise ValueError(
            f"{flag} {path}: the folder {folder} does not exist; create it "
            f"(mkdir -p {folder}) or give a path in an existing folder."
        )
    if not os.access(folder, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        what = p if p.exists() else folder
        raise ValueError(
            f"{flag} {path}: {what} is not writable by this user; give a path in a folder "
            "you can write to."
        )


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all: a temporary file in the same folder,
    then a rename (readers never see a partial file; an old file stays until replaced)."""
    p = Path(path)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644 & ~_umask())
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
