"""How profctl reads a command line before click parses it, as kernel engineers type it: ``--causal`` alone means
true and ``--no-causal`` false; an old spelling is accepted (hidden from --help, with a note); an option that takes
a value never swallows the option after it (``--backend --seqlen 512`` is an error, not the backend "--seqlen");
an option given twice with different values, or with its own negation, is an error naming both as typed.

All of it is one pure function, ``read(tokens, table)``, over a :class:`Table` of the command's options (which take
a value, which are flags, which take a comma list, their other spellings, the hidden old ones). No click here:
``_command.ProfctlCommand`` builds each command's table from its typer options and the declarations below, and hands
click the rewritten tokens; tests/unit/test_cli_argv.py tests this module with tables written by hand.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from profctl.errors import UsageError

# ------------------------------------------------------------------------------------------ declarations
#: parameters that take a comma list: a second value is a sweep to write as one list, never a replacement
LIST_PARAMS = frozenset({"backend", "batch", "seqlen", "seqlen_q", "seqlen_kv", "heads", "kv_heads", "head_dim",
                         "dtype", "causal", "pass_", "layout", "model", "layers", "mode", "window", "docs"})
#: options that may stand alone: the value a bare one means (every benchmark script spells it `--causal`)
BARE_VALUE: Mapping[str, str] = {"--causal": "true"}
#: negated spellings of those: the option and the value they mean
NEGATED: Mapping[str, tuple[str, str]] = {"--no-causal": ("--causal", "false")}
#: old spellings kept for one release, hidden from --help: command ('*': any) -> {old: new words}
OLD_SPELLINGS: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    "*": {"--reports-dir": ("--reports",)},
    "bench": {"--point-timeout": ("--timeout",)},
    "runs": {"-n": ("--limit",)},
    "doctor": {"--json": ("--format", "json")},
}
#: the release the old spellings go in (CHANGELOG.md says so; the note says it once when one is used)
REMOVED_IN = "0.3"
#: flags a message may name for an option the user gave under another one (`--seqlen` sets seqlen-q and -kv)
DERIVED: Mapping[str, str] = {"--seqlen-q": "seqlen", "--seqlen-kv": "seqlen"}
#: a word that is an option on every command (click adds it)
HELP = "--help"


# ------------------------------------------------------------------------------------------ the table
# (NamedTuples and a plain class rather than dataclasses: this module loads with every `profctl --help`, and a
# dataclass takes ~0.3 ms to create, a NamedTuple ~0.05 ms)
class Option(NamedTuple):
    """One option of a command, as the reader needs it."""

    param: str  #: the parameter it sets
    flags: tuple[str, ...]  #: its spellings, as declared (``--seqlen``, ``-s``)
    negations: tuple[str, ...] = ()  #: a flag's off spellings (``--no-nvtx``)
    takes_value: bool = True  #: False for a flag (or a count)
    is_list: bool = False  #: takes a comma list
    multiple: bool = False  #: may be given several times


class Table:
    """Everything ``read`` knows about a command: its options, and the hidden old spellings it accepts
    ({old: new words}). `bare`, `negated` and `derived` default to profctl's declarations."""

    def __init__(self, options: Iterable[Option], old: Mapping[str, tuple[str, ...]] | None = None, *,
                 bare: Mapping[str, str] = BARE_VALUE, negated: Mapping[str, tuple[str, str]] = NEGATED,
                 derived: Mapping[str, str] = DERIVED) -> None:
        self.options = tuple(options)
        self.old = dict(old or {})
        self.bare, self.negated, self.derived = dict(bare), dict(negated), dict(derived)
        #: {any spelling: its option} (old spellings excluded)
        self.by_flag = {f: o for o in self.options for f in (*o.flags, *o.negations)}
        self.by_param = {o.param: o for o in self.options}

    def is_option(self, tok: str) -> bool:
        """Whether `tok` is an option word (so never a value): a flag, an old or negated spelling, ``--``."""
        head = tok.split("=", 1)[0] if tok.startswith("--") else tok
        return (tok == "--" or head in self.by_flag or head in self.old or head in self.negated
                or tok == HELP)


def table(command: str, options: Iterable[Option]) -> Table:
    """The table of `command`: its options, and the old spellings declared for it (or for every command) whose
    new spelling it has."""
    opts = tuple(options)
    flags = {f for o in opts for f in (*o.flags, *o.negations)}
    old = {**OLD_SPELLINGS["*"], **OLD_SPELLINGS.get(command, {})}
    return Table(opts, old={k: v for k, v in old.items() if v[0] in flags})


# ------------------------------------------------------------------------------------------ errors
class ArgvError(UsageError):
    """A command line refused before click parses it. `option`: the flag as the user typed it; `notes`: the
    notes (old spellings) the line earned before the error, to print first."""

    def __init__(self, message: str, *, option: str, hint: str | None = None, notes: Sequence[str] = ()) -> None:
        super().__init__(message, hint=hint)
        self.option = option
        self.notes = tuple(notes)


class NeedsValue(ArgvError):
    """An option that takes a value is followed by another option (`next_word`) instead."""

    def __init__(self, option: str, next_word: str, notes: Sequence[str] = ()) -> None:
        super().__init__(f"{option} needs a value, but the word after it is the option {next_word}", option=option,
                         hint=f"give {option} a value (e.g. {option} VALUE {next_word} ...)", notes=notes)
        self.next_word = next_word


class GivenTwice(ArgvError):
    """One option given twice with different values, or together with its negation (``--causal --no-causal``):
    one would silently win. `option` and `other`: the two as typed."""

    def __init__(self, first: _Given, second: _Given, *, is_list: bool, notes: Sequence[str] = ()) -> None:
        sweep = " (a comma list sweeps several values)" if is_list or "," in first.value + second.value else ""
        super().__init__(f"{first.shown} and {second.shown} both given: one would silently replace the other; "
                         f"give one{sweep}", option=first.flag, notes=notes)
        self.other = second.flag


# ------------------------------------------------------------------------------------------ reading
class Reading(NamedTuple):
    """A command line as click should see it (`tokens`), {parameter: flag as typed, the first time} and the notes
    to print (one per old spelling used)."""

    tokens: list[str]
    typed: dict[str, str]
    notes: tuple[str, ...]
    #: the words after ``--`` (a user's program), None when the line has no ``--``
    program: tuple[str, ...] | None = None


class _Given(NamedTuple):
    flag: str  #: as typed
    value: str  #: the value it gave (a flag: itself)
    shown: str  #: how an error names it (``-s 512``, ``--causal``)


def rewrite(tokens: Sequence[str], table: Table) -> list[str]:
    """The command line with bare and negated flags given their values and old spellings replaced."""
    return read(tokens, table).tokens


def read(tokens: Sequence[str], table: Table) -> Reading:
    """`tokens` rewritten for click, the flags as typed, and the notes. NeedsValue for an option that would
    swallow the next option, GivenTwice for an option given twice with different values; everything after
    ``--`` belongs to a user's program and is left alone."""
    out: list[str] = []
    seen: dict[str, list[_Given]] = {}
    notes: list[str] = []
    program: tuple[str, ...] | None = None
    for i, tok in enumerate(tokens):
        if tok == "--":
            out += tokens[i:]
            program = tuple(tokens[i + 1:])
            break
        words, given = _word(tok, tokens[i + 1] if i + 1 < len(tokens) else None, table, notes)
        if given is not None:
            seen.setdefault(given[0], []).append(given[1])
        out += words
    for param, occ in seen.items():
        opt = table.by_param[param]
        if not opt.multiple and len({g.value for g in occ}) > 1:
            second = next(g for g in occ[1:] if g.value != occ[0].value)
            raise GivenTwice(occ[0], second, is_list=opt.is_list, notes=notes)
    return Reading(out, {param: occ[0].flag for param, occ in seen.items()}, tuple(notes), program)


def _word(tok: str, nxt: str | None, table: Table, notes: list[str]) -> tuple[list[str], tuple[str, _Given] | None]:
    """One word of the line: what click gets for it, and (parameter, what it gave) when it is an option. The
    value after an option is a word of its own (the next call)."""
    head, eq, value = tok.partition("=") if tok.startswith("--") else (tok, "", "")
    typed_as, bare, words = head, False, [tok]
    if head in table.old:
        new = table.old[head]
        notes.append(f"{head} is now {' '.join(new)}; the old spelling goes in {REMOVED_IN}")
        words = [*new[:-1], new[-1] + (eq + value if eq else "")]
        head = new[0]
    elif head in table.negated and table.negated[head][0] in table.by_flag:
        head, value = table.negated[head]
        words, eq, bare = [head, value], "=", True
    opt = table.by_flag.get(head)
    if opt is None:
        return words, None
    alone = opt.takes_value and not eq and words[-1] == head  # its value, if any, is the next word
    if alone and head in table.bare and (nxt is None or table.is_option(nxt)):
        words, value, eq, bare, alone = [*words, table.bare[head]], table.bare[head], "=", True, False
    elif alone and nxt is not None and table.is_option(nxt) and not _is_number(nxt):
        raise NeedsValue(typed_as, nxt, notes)
    given = value if eq else (nxt if alone and nxt is not None else typed_as)
    shown = typed_as if bare or given == typed_as else f"{typed_as} {given}"
    return words, (opt.param, _Given(typed_as, given, shown))


def _is_number(tok: str) -> bool:
    return re.fullmatch(r"-\d+(\.\d*)?", tok) is not None


# ------------------------------------------------------------------------------------------ naming flags as typed
def as_typed(table: Table, typed: Mapping[str, str]) -> dict[str, str]:
    """{flag a message may name: the flag the user typed for that option} (``--seqlen-q`` -> ``-s`` when the user
    typed ``-s``, which sets seqlen-q)."""
    out: dict[str, str] = {}
    for opt in table.options:
        if opt.param in typed:
            longs = [f for f in opt.flags if f.startswith("--")] or list(opt.flags)
            for f in (*longs, *opt.flags):
                if f != typed[opt.param]:
                    out.setdefault(f, typed[opt.param])
    for flag, param in table.derived.items():
        if param in typed and flag not in out and flag not in typed.values():
            out[flag] = typed[param]
    return out


_FLAG = re.compile(r"(?<![\w-])--?[A-Za-z][\w-]*(?![\w-])")


def name_flags(message: str, table: Table, typed: Mapping[str, str]) -> str:
    """profctl's own `message` with every flag it names spelled the way the user typed it."""
    names = as_typed(table, typed)
    if not names:
        return message
    return _FLAG.sub(lambda m: names.get(m.group(0), m.group(0)), message)
