"""Names that become paths: one check for every name gnncore turns into a file
or directory name (a dataset's, a graph's, a Dagster partition's, a checkpoint
directory's).

A safe name is one path component that stays inside its parent directory:

* 1 to :data:`MAX_NAME_LENGTH` characters;
* no ``/`` or ``\\``, no control or other non-printing character (newline,
  tab, NUL, DEL, the Unicode format and line separators), no whitespace other
  than the plain space, and no space at either end;
* it does not start with ``.`` (hidden files, ``.`` and ``..``) or ``-`` (read
  as an option by other tools), and it holds no ``..``.

Letters of any script, digits and other printable punctuation are allowed, so
a graph named after its file (``Email-Enron``, ``my edges (1)``) stays valid.
The whole string must match (``'cora\\n'`` is refused, which a ``match`` with
``$`` would accept).
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from gnncore.errors import InputError

__all__ = ["MAX_NAME_LENGTH", "is_safe_name", "safe_name"]

#: The longest name accepted, in characters.
MAX_NAME_LENGTH = 128

# One path component: no separator, no ASCII control character; neither '.' nor
# '-' nor a space first, no space last. Non-ASCII non-printing characters are
# refused by _printable below.
_COMPONENT = re.compile(r"[^./\\\x00-\x20\x7f-][^/\\\x00-\x1f\x7f]*")


def _printable(char: str) -> bool:
    """A character that shows as itself: no control, format, surrogate, private
    or unassigned character, no separator but the plain space."""
    category = unicodedata.category(char)
    return char == " " or category[0] not in "CZ"


def _problem(name: object) -> str | None:
    """Why ``name`` is not a safe name, or ``None`` when it is."""
    if not isinstance(name, str):
        return f"is a {type(name).__name__}, not a string"
    if not name:
        return "is empty"
    if len(name) > MAX_NAME_LENGTH:
        return f"is {len(name)} characters long, at most {MAX_NAME_LENGTH} are allowed"
    if "/" in name or "\\" in name:
        return "holds a path separator ('/' or '\\')"
    if ".." in name:
        return "holds '..'"
    if name[0] in ".-":
        return f"starts with {name[0]!r}"
    if not all(_printable(c) for c in name):
        return "holds a control or non-printing character"
    if name != name.strip():
        return "starts or ends with a space"
    if _COMPONENT.fullmatch(name) is None:  # every rule above, as one pattern
        return "is not a plain file name"
    return None


def is_safe_name(name: object) -> bool:
    """Whether ``name`` is a safe name (see the module docstring)."""
    return _problem(name) is None


def safe_name(name: str, what: str = "name", where: str | Path | None = None) -> str:
    """``name`` when it is safe to use as one path component, else an error.

    Args:
        name (str): The name to check.
        what (str): What the name is, for the message (``"dataset name"``,
            ``"--name"``, ``"dataset partition"``). (default: ``"name"``)
        where (str or Path, optional): The file the name comes from (a
            manifest), named first by the error; ``what`` is named first
            when there is none. (default: :obj:`None`)

    Returns:
        str: ``name`` itself.

    Raises:
        InputError: One line naming ``where`` or ``what``, the name and the
            problem, e.g. ``--name: '../x' holds a path separator ('/' or '\\')
            ...`` or ``g/manifest.json: graph name '../x' holds ...``.
    """
    problem = _problem(name)
    if problem is None:
        return name
    rule = (
        f"a name becomes a file name, so it must be 1-{MAX_NAME_LENGTH} printable "
        "characters without '/', '\\' or '..', not starting with '.' or '-'"
    )
    if where is None:
        raise InputError(f"{name!r} {problem}: {rule}", what)
    raise InputError(f"{what} {name!r} {problem}: {rule}", where)
