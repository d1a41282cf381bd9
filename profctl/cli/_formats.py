"""The format an output file's name asks for: `-o NAME.html` is HTML when -f is not given, and `-f csv -o NAME.json`
is refused naming both (a text table written into a file named .html or .json reads as a broken file)."""

from __future__ import annotations

from pathlib import Path

from profctl.errors import UsageError

#: the formats each output file name ending can hold, the first the one it asks for when -f is not given
EXTENSIONS: dict[str, tuple[str, ...]] = {
    ".html": ("html",), ".htm": ("html",), ".json": ("json", "perfetto"), ".csv": ("csv",),
    ".md": ("markdown",), ".markdown": ("markdown",), ".txt": ("table", "markdown"),
}
#: a command context's meta key: `-o NAME` when the format was taken from NAME's ending
FROM_EXTENSION = "profctl.format_from_extension"


def format_of_output(output: Path | str, format: str, *, given: bool, flags: tuple[str, str] = ("-f", "-o")) -> str:
    """The format to write `output` in: `format` when -f was `given` (UsageError naming both, as typed in
    `flags`, when the file's ending holds another format), else the one the ending asks for, else `format`.
    Standard output ('-') and an ending not in EXTENSIONS ask for nothing."""
    if str(output) == "-":
        return format
    suffix = Path(str(output)).suffix.lower()
    holds = EXTENSIONS.get(suffix)
    if holds is None:
        return format
    if not given:
        return holds[0]
    if format not in holds:
        f_flag, o_flag = flags
        raise UsageError(f"{f_flag} {format} and {o_flag} {output} contradict each other: a {suffix} file holds "
                         f"{' or '.join(holds)}; leave out {f_flag}, or name the file for {format}")
    return format
