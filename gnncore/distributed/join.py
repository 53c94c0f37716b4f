"""The join token: a shared secret every rank proves at rendezvous.

torch's rendezvous store (``TCPStore``) and gloo accept whoever connects. So
that a process without the run's secret cannot join its ranks, every rank
proves, before the process group exists and before any data moves, that it
holds the same token as the others:

1. rank 0 publishes a fresh random nonce in the store (``gnncore/join/nonce``);
2. every rank publishes ``HMAC-SHA256(token, "gnncore-join|<nonce>|<rank>|<world>")``
   under ``gnncore/join/<rank>`` (a rank without a token publishes ``none``);
3. every rank waits for all the proofs (at most ``timeout`` seconds) and checks
   each against its own token. Any mismatch stops every rank with a
   :class:`JoinRefused` naming the rank: the one with the wrong token says
   its token is not rank 0's, the others name it.

The token itself never crosses the wire; a proof is bound to the run's nonce,
so one recorded from an earlier run does not verify. What this does *not* do
(``docs/DISTRIBUTED.md``, "Threat model"): the store stays unauthenticated (a
host that reaches the port can disrupt the run), the traffic is not encrypted,
and a peer that can read the store during the rendezvous could race an honest
rank. After the rendezvous the ranks exchange tensors only, never pickles.

Where the token comes from (:func:`join_token`): ``GNNCORE_JOIN_TOKEN``, else
the file named by ``GNNCORE_JOIN_TOKEN_FILE`` (or ``--join-token-file``),
which must belong to this user and be readable by nobody else.
:func:`launch_token` resolves it once per launch: a one-machine launch without
a token generates one for its own ranks; a several-machine launch generates and
prints one on machine 0, and refuses to start on the others without it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gnncore.errors import GnnCoreError, InputError

#: The environment variable holding the token (what the launchers hand their ranks).
TOKEN_ENV = "GNNCORE_JOIN_TOKEN"
#: The environment variable naming a file that holds the token.
TOKEN_FILE_ENV = "GNNCORE_JOIN_TOKEN_FILE"
#: The shortest token accepted (characters); generated ones have 64 hex digits.
MIN_TOKEN_CHARS = 16
#: The store keys' prefix.
PREFIX = "gnncore/join/"
_NONE = b"none"


class JoinRefused(GnnCoreError):
    """A rank was refused at rendezvous: a wrong, missing or late join token.
    The message is one line naming the rank."""


class TokenError(GnnCoreError, ValueError):
    """No usable join token where a launch needs one (one line; a bad token
    file is an :class:`~gnncore.errors.InputError` naming it)."""


def _checked(token: str, path: Path | None = None) -> str:
    token = token.strip()
    if len(token) < MIN_TOKEN_CHARS:
        problem = (
            f"the join token has {len(token)} characters; it needs {MIN_TOKEN_CHARS} at "
            "least (e.g. python -c 'import secrets; print(secrets.token_hex(32))')"
        )
        if path is not None:
            raise InputError(problem, path)
        raise TokenError(f"{TOKEN_ENV}: {problem}")
    return token


def read_token_file(path: str | os.PathLike[str]) -> str:
    """The token in ``path``, a regular file of this user that neither its group
    nor others may read or write (like ssh's keys).

    Raises:
        InputError: One line naming the file: missing, not a regular file, owned
            by another user, open to group or others, or too short a token.
    """
    path = Path(path)
    try:
        info = path.stat()
    except OSError as exc:
        raise InputError(f"cannot read the join token file: {exc.strerror}", path) from None
    if not stat.S_ISREG(info.st_mode):
        raise InputError("the join token file is not a regular file", path)
    if info.st_uid != os.geteuid():
        raise InputError(
            f"the join token file belongs to uid {info.st_uid}, not to this user ({os.geteuid()})",
            path,
        )
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        raise InputError(
            f"the join token file is open to group or others (mode {mode:04o}): "
            f"run chmod 600 {path}",
            path,
        )
    return _checked(path.read_text(encoding="utf-8"), path)


def join_token(
    token_file: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> str | None:
    """The join token: ``token_file`` when given, else ``GNNCORE_JOIN_TOKEN``,
    else the file named by ``GNNCORE_JOIN_TOKEN_FILE`` (:func:`read_token_file`);
    ``None`` when there is none."""
    env = os.environ if environ is None else environ
    if token_file is not None:
        return read_token_file(token_file)
    value = env.get(TOKEN_ENV)
    if value:
        return _checked(value)
    path = env.get(TOKEN_FILE_ENV)
    if path:
        return read_token_file(path)
    return None


def launch_token(
    nnodes: int = 1, node_rank: int = 0, token_file: str | os.PathLike[str] | None = None
) -> str:
    """The token a launch hands its ranks (:func:`join_token`). Without one, a
    one-machine launch generates one for its own ranks; machine 0 of several
    generates one and prints it to stderr (the other machines need it); the
    other machines refuse to start.

    Raises:
        InputError: A bad token file.
        TokenError: A machine other than 0 without a token, or too short a token.
    """
    token = join_token(token_file)
    if token is not None:
        return token
    if nnodes > 1 and node_rank > 0:
        raise TokenError(
            f"machine {node_rank} of {nnodes} has no join token: set {TOKEN_ENV} (or "
            f"{TOKEN_FILE_ENV}, --join-token-file) to the token machine 0 printed"
        )
    token = secrets.token_hex(32)
    if nnodes > 1:
        print(
            f"gnncore: no join token given; this run's is {token}\n"
            f"gnncore: start the other machines with {TOKEN_ENV}={token} "
            f"(or a chmod 600 file in {TOKEN_FILE_ENV})",
            file=sys.stderr,
            flush=True,
        )
    return token


def proof(token: str, nonce: bytes, rank: int, world: int) -> bytes:
    """Rank ``rank``'s proof of ``token`` for the run of ``nonce`` (hex HMAC-SHA256)."""
    message = b"gnncore-join|" + nonce + f"|{rank}|{world}".encode()
    return hmac.new(token.encode(), message, hashlib.sha256).hexdigest().encode()


def _wait(store: Any, keys: list[str], timeout: float, late: str) -> None:
    """Wait until the store holds ``keys``; after ``timeout`` seconds, a
    :class:`JoinRefused` saying ``late`` with the keys still missing
    (``{missing}``)."""
    # Polled, not ``store.wait``: its timeout leaves C++ warnings on stderr.
    deadline = time.monotonic() + timeout
    pause = 0.005
    while not store.check(keys):
        if time.monotonic() > deadline:
            missing = [k.removeprefix(PREFIX) for k in keys if not store.check([k])]
            if missing:
                raise JoinRefused(late.format(missing=", ".join(missing), timeout=timeout))
        time.sleep(pause)
        pause = min(2 * pause, 0.1)


def check_join(store: Any, rank: int, world: int, token: str | None, timeout: float) -> None:
    """Prove this rank's token to the others through ``store`` and check theirs
    (every rank calls it, before ``init_process_group``); see the module
    docstring.

    Args:
        store: The rendezvous store (a ``torch.distributed.Store``).
        rank (int): This rank.
        world (int): The number of ranks.
        token (str, optional): This rank's token; ``None``: it has none (it is
            refused, and so are the others, which name it).
        timeout (float): Seconds to wait for the nonce and the others' proofs.

    Raises:
        JoinRefused: This rank has no token or another token than rank 0, or
            another rank has a wrong, missing or late one (the message names it).
    """
    if rank == 0:
        store.set(PREFIX + "nonce", secrets.token_hex(16))
    _wait(
        store,
        [PREFIX + "nonce"],
        timeout,
        f"rank {rank} of {world}: rank 0 published no join nonce within {{timeout:g}} s: refused",
    )
    nonce = bytes(store.get(PREFIX + "nonce"))
    store.set(PREFIX + str(rank), _NONE if token is None else proof(token, nonce, rank, world))
    if token is None:
        raise JoinRefused(
            f"rank {rank} of {world} has no join token ({TOKEN_ENV} or {TOKEN_FILE_ENV}): refused"
        )
    others = [r for r in range(world) if r != rank]
    _wait(
        store,
        [PREFIX + str(r) for r in others],
        timeout,
        f"rank {rank} of {world}: ranks [{{missing}}] presented no join proof within "
        "{timeout:g} s: refused them",
    )
    missing, wrong = [], []
    for r in others:
        got = bytes(store.get(PREFIX + str(r)))
        if got == _NONE:
            missing.append(r)
        elif not hmac.compare_digest(got, proof(token, nonce, r, world)):
            wrong.append(r)
    if rank != 0 and 0 in wrong:
        raise JoinRefused(
            f"rank {rank} of {world}: its join token is not rank 0's ({TOKEN_ENV} must be "
            "the same on every machine): refused"
        )
    if missing or wrong:
        parts = []
        if wrong:
            parts.append(f"ranks {wrong} presented a wrong join token")
        if missing:
            parts.append(f"ranks {missing} have no join token")
        raise JoinRefused(f"rank {rank} of {world}: {'; '.join(parts)}: refused them")


__all__ = [
    "JoinRefused",
    "MIN_TOKEN_CHARS",
    "TokenError",
    "TOKEN_ENV",
    "TOKEN_FILE_ENV",
    "check_join",
    "join_token",
    "launch_token",
    "proof",
    "read_token_file",
]
