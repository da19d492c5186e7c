"""Byte sizes as people read and write them: ``format_bytes`` and ``parse_size``.

Kept apart from :mod:`torchplace.memory` (which needs torch) so the command line can
parse and print sizes without importing torch; :mod:`torchplace.memory` re-exports both.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

__all__ = ["format_bytes", "parse_size"]

_BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_MULTIPLIERS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "pb": 10**15,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    "pib": 2**50,
}
_LARGEST = 2**60  # 1 EiB: anything larger is a typo
_SIZE = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?)\s*([a-z]*)")
_ACCEPTED = (
    "a positive number of bytes ('1048576', '1e9') or a number with a unit: "
    "B, KB, MB, GB, TB, PB (powers of 1000) or KiB, MiB, GiB, TiB, PiB (powers of 1024), "
    "e.g. '24GB', '22.5GiB', '512 MiB'"
)


def format_bytes(n: int) -> str:
    """Show a byte count in binary units (1 KiB = 1024 B, 1 GiB = 1024**3 B).

    Bytes are whole, KiB and MiB get one decimal, GiB and above two.

    Args:
        n: Bytes (negative for a decrease).

    Returns:
        E.g. ``"512 B"``, ``"3.0 MiB"``, ``"1.50 GiB"``.

    Examples:
        >>> from torchplace.memory import format_bytes
        >>> format_bytes(512), format_bytes(3 * 1024**2), format_bytes(3 * 2**29)
        ('512 B', '3.0 MiB', '1.50 GiB')
        >>> format_bytes(-2048)
        '-2.0 KiB'
    """
    sign = "-" if n < 0 else ""
    value = float(abs(n))
    if value < 1024:
        return f"{sign}{int(value)} B"
    for power in range(1, len(_BINARY_UNITS)):
        decimals = 1 if power < 3 else 2
        scaled = round(value / 1024**power, decimals)
        if scaled < 1024 or power == len(_BINARY_UNITS) - 1:
            return f"{sign}{scaled:.{decimals}f} {_BINARY_UNITS[power]}"
    raise AssertionError("unreachable")  # pragma: no cover


def parse_size(text: str) -> int:
    """Read a size such as ``"24GB"``, ``"22.5GiB"`` or ``"1e9"`` as bytes.

    Units are case-insensitive: B, KB, MB, GB, TB, PB are decimal (``"24GB"`` is
    24 * 10**9 bytes, as vendors count), KiB, MiB, GiB, TiB, PiB binary (``"22.5GiB"`` is
    22.5 * 1024**3). A number without a unit is bytes. Fractions of a byte are rounded.

    Args:
        text: The size.

    Returns:
        Bytes, at least 1.

    Raises:
        ValueError: If ``text`` is not a size, or is zero, negative or not a number.

    Examples:
        >>> from torchplace.memory import parse_size
        >>> parse_size("24GB"), parse_size("22.5 GiB"), parse_size("512mib")
        (24000000000, 24159191040, 536870912)
        >>> parse_size("1e9")
        1000000000
    """
    if not isinstance(text, str):
        raise ValueError(f"A size must be a string, got {text!r}; accepted: {_ACCEPTED}.")
    match = _SIZE.fullmatch(text.strip().lower())
    if match is None or match.group(2) not in _MULTIPLIERS:
        raise ValueError(f"Cannot read {text!r} as a size; accepted: {_ACCEPTED}.")
    number, unit = match.groups()
    try:
        exact = Decimal(number) * _MULTIPLIERS[unit]
    except InvalidOperation as e:  # pragma: no cover - the pattern admits only numbers
        raise ValueError(f"Cannot read {text!r} as a size; accepted: {_ACCEPTED}.") from e
    if exact > _LARGEST:
        raise ValueError(f"The size {text!r} is larger than any memory (over 1 EiB).")
    result = int(exact.to_integral_value())
    if result <= 0:
        raise ValueError(f"A size must be positive, got {text!r}; accepted: {_ACCEPTED}.")
    return result
