"""The join token: real rank processes on localhost refuse a peer with a wrong or
no token, at rendezvous and with one line each; the token's sources (environment,
owner-only file) and the launch's own token."""

from __future__ import annotations

import operator
import re
import time

import pytest

from gnncore.distributed.join import (
    TOKEN_ENV,
    TOKEN_FILE_ENV,
    TokenError,
    join_token,
    launch_token,
    read_token_file,
)
from gnncore.distributed.launch import RankStatus, blame
from gnncore.distributed.launch.forked import Launcher, rank_context
from gnncore.distributed.launch.net import LOCALHOST, master_store
from gnncore.distributed.launch.spawn import _rank_main
from gnncore.errors import InputError

GOOD = "a" * 64
WRONG = "b" * 64


def test_ranks_with_a_wrong_or_no_token_are_refused_and_so_are_their_peers() -> None:
    # Three real rank processes on one store (as spawn_local starts them): rank 0
    # holds the token, rank 1 another one, rank 2 none.
    ctx = rank_context()
    results = ctx.Queue()
    timeout = 30.0
    store, port = master_store(LOCALHOST, 0, 3, timeout)
    procs = [
        ctx.Process(
            target=_rank_main,
            args=(
                operator.add,
                rank,
                3,
                (LOCALHOST, port),
                "gloo",
                timeout,
                (),
                results,
                token,
                Launcher.here(),
            ),
            daemon=True,
        )
        for rank, token in enumerate([GOOD, WRONG, None])
    ]
    started = time.monotonic()
    for proc in procs:
        proc.start()
    reports = {}
    try:
        for _ in procs:
            rank, ok, text, peer_loss = results.get(timeout=60)
            reports[rank] = (ok, text, peer_loss)
        for proc in procs:
            proc.join(timeout=10)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
        del store
    # Nobody waited for the collective timeout: refused at once, every rank.
    assert time.monotonic() - started < timeout
    assert [p.exitcode for p in procs] == [1, 1, 1]
    assert all(not ok and not peer_loss for ok, _, peer_loss in reports.values())
    texts = {rank: text for rank, (_, text, _) in reports.items()}
    assert texts[0] == (
        "rank 0 of 3: ranks [1] presented a wrong join token; ranks [2] have no join token: "
        "refused them"
    )
    assert texts[1] == (
        f"rank 1 of 3: its join token is not rank 0's ({TOKEN_ENV} must be the same on every "
        "machine): refused"
    )
    assert texts[2] == (f"rank 2 of 3 has no join token ({TOKEN_ENV} or {TOKEN_FILE_ENV}): refused")
    assert all("\n" not in t and GOOD not in t and WRONG not in t for t in texts.values())
    # What the launcher makes of them: rank 0's line, then the others' in full.
    err = blame([RankStatus(r, exitcode=1, error=t) for r, t in sorted(texts.items())], 3)
    assert str(err) == (
        f"rank 0 of 3 failed:\n{texts[0]}\nthen: rank 1: {texts[1]}; rank 2: {texts[2]}"
    )


def test_a_peer_that_never_proves_is_refused_after_the_timeout() -> None:
    # A process that reaches the store but is not a gnncore rank (or an older
    # one) publishes no proof: the ranks stop after the timeout, naming it.
    import datetime

    from torch.distributed import TCPStore

    from gnncore.distributed.join import JoinRefused, check_join

    store = TCPStore(LOCALHOST, 0, 1, True, datetime.timedelta(seconds=5), wait_for_workers=False)
    started = time.monotonic()
    with pytest.raises(JoinRefused) as caught:
        check_join(store, 1, 3, GOOD, timeout=0.3)  # rank 0 never came
    assert str(caught.value) == (
        "rank 1 of 3: rank 0 published no join nonce within 0.3 s: refused"
    )
    with pytest.raises(JoinRefused) as caught:
        check_join(store, 0, 3, GOOD, timeout=0.3)  # now rank 0; ranks 1 and 2 proved nothing
    assert str(caught.value) == (
        "rank 0 of 3: ranks [1, 2] presented no join proof within 0.3 s: refused them"
    )
    assert time.monotonic() - started < 5


def test_the_token_comes_from_the_environment_or_an_owner_only_file(tmp_path) -> None:
    path = tmp_path / "token"
    path.write_text(GOOD + "\n")
    path.chmod(0o644)
    with pytest.raises(InputError) as caught:
        read_token_file(path)
    assert str(caught.value) == (
        f"{path}: the join token file is open to group or others (mode 0644): run chmod 600 {path}"
    )
    path.chmod(0o600)
    assert read_token_file(path) == GOOD
    assert join_token(environ={TOKEN_FILE_ENV: str(path)}) == GOOD
    assert join_token(environ={TOKEN_ENV: WRONG, TOKEN_FILE_ENV: str(path)}) == WRONG
    assert join_token(path, environ={TOKEN_ENV: WRONG}) == GOOD  # --join-token-file first
    assert join_token(environ={}) is None
    with pytest.raises(TokenError, match=f"^{TOKEN_ENV}: the join token has 5 characters"):
        join_token(environ={TOKEN_ENV: "short"})
    with pytest.raises(InputError, match="cannot read the join token file"):
        read_token_file(tmp_path / "missing")


def test_launches_generate_print_or_demand_the_token(monkeypatch, capsys) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    monkeypatch.delenv(TOKEN_FILE_ENV, raising=False)
    one = launch_token()  # one machine: generated for its own ranks, not printed
    assert re.fullmatch("[0-9a-f]{64}", one) and launch_token() != one
    assert capsys.readouterr().err == ""
    first = launch_token(nnodes=2, node_rank=0)  # machine 0 of 2: printed
    assert f"{TOKEN_ENV}={first}" in capsys.readouterr().err
    with pytest.raises(TokenError) as caught:
        launch_token(nnodes=2, node_rank=1)  # the others need it: refused before starting
    assert str(caught.value) == (
        f"machine 1 of 2 has no join token: set {TOKEN_ENV} (or {TOKEN_FILE_ENV}, "
        "--join-token-file) to the token machine 0 printed"
    )
    monkeypatch.setenv(TOKEN_ENV, GOOD)
    assert launch_token(nnodes=2, node_rank=1) == GOOD
