"""The end of every benchmark: its targets printed as "met" or "MISSED", and the exit status."""

from __future__ import annotations


def report(checks: list[tuple[str, bool]], *, heading: str = "targets", width: int = 60) -> int:
    """Print each (label, met) under ``heading``; 0 when every target is met, else 1."""
    print(f"\n{heading}:")
    for label, ok in checks:
        print(f"  {label:<{width}} {'met' if ok else 'MISSED'}")
    return 0 if all(ok for _, ok in checks) else 1
