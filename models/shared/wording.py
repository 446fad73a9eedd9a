"""Small rules for text shown to people: one line, a length limit, plurals, sizes and speeds."""

from __future__ import annotations


def shorten(text: str, limit: int) -> str:
    """``text`` on one line with runs of whitespace collapsed, cut at a word boundary with "…" if too long."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return flat[: limit - 1].rsplit(" ", 1)[0] + "…"


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def format_eta(seconds: float | None) -> str:
    if seconds is None:
        return "estimating…"
    if seconds < 60:
        return f"{seconds:.0f} s left"
    return f"{seconds / 60:.0f} min left"


def format_read_speed(bytes_per_s: float) -> str:
    """A device's memory read speed, as the worker measured it: "reads 11.8 GB/s", or that it was not measured."""
    return f"reads {bytes_per_s / 1e9:.1f} GB/s" if bytes_per_s > 0 else "read speed not measured"


def format_bits_per_s(bytes_per_s: float) -> str:
    """A link's speed as networks are rated: 940 Mbit/s, 12.5 Gbit/s."""
    bits = bytes_per_s * 8
    for unit, size in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bits >= size:
            value = bits / size
            return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"
    return f"{bits:.0f} bit/s"


def format_bytes(n_bytes: int) -> str:
    """A size as people read it: "1.5 GiB", or "300 MiB" below a gibibyte."""
    if n_bytes >= 1 << 30:
        return f"{n_bytes / (1 << 30):.1f} GiB"
    return f"{n_bytes / (1 << 20):.0f} MiB"
