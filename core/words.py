"""How the platform says a number to a person, where more than one app says it."""


def say_seconds(seconds: int) -> str:
    """A runtime as a person writes it: "36 h", "90 min", "45 s" (with the seconds when uneven)."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size} {unit}"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h ({seconds:,} s)"
    return f"{seconds:,} s"
