"""Starting ranks: torch's elastic launcher (``torchrun``) or spawned processes.

Two launchers run ``fn(rank, world_size, *args)`` in every rank of a
``torch.distributed`` process group and return the results in rank order:

* :func:`elastic_run` starts this machine's ranks through torch's own launcher
  (:func:`torch.distributed.launcher.api.elastic_launch`, what ``torchrun``
  runs), with ``nnodes``/``node_rank``/``master_addr``/``master_port`` for
  several machines. Each rank's entry point (:func:`rank_entry`) reads
  ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``
  from what torch's agent set for it.
* :func:`spawn_local` starts them with :mod:`multiprocessing` alone (tests and
  small single-machine runs).

Both fork their ranks from :mod:`multiprocessing`'s fork server, which has
imported torch and PyG once (:mod:`~gnncore.distributed.launch.forked`); a rank
takes the launching process's environment and output, and names itself
``gnncore-rank<N>`` for ``ps`` and ``top``.

**Addresses.** Everything listens on ``127.0.0.1`` unless ``master_addr``
says otherwise: the rendezvous store is created on a socket bound to
``master_addr`` (torch's own would listen on every interface), and each rank's
gloo transport binds the interface that routes to ``master_addr`` (``lo`` for
the default; set ``GLOO_SOCKET_IFNAME`` to choose another).

**Faults.** A rank that raises or dies makes the launch raise
:class:`RankFailed`. When one rank dies, its peers' collectives fail a moment
later ("connection reset by peer"), so several ranks fail together; the
launcher then names the rank that caused it: a rank that died (a signal, or an
exit without reporting) before one that raised an error of its own, before one
whose error was the loss of a peer (:func:`is_peer_loss`). :func:`spawn_local`
waits ``grace`` seconds after the first failure for the others' statuses; the
elastic launcher sees every rank that has exited when it polls (every 0.1 s),
and a SIGKILLed rank is gone before any peer can notice. A collective that
waits past ``timeout`` fails in its rank, and a rank still running after
``run_timeout`` reports and exits, so nothing hangs.

**Joining.** Every rank proves the launch's join token to the others through
the store before ``init_process_group`` (:func:`~gnncore.distributed.join.check_join`):
a rank without it, or with another one, is refused with one line, and so are
its peers. The launchers take the token from ``GNNCORE_JOIN_TOKEN`` or a token
file (:func:`~gnncore.distributed.join.launch_token`), or generate one.
The pickles here (the spec and result files of :func:`elastic_run`, the queue
of :func:`spawn_local`, what the fork server passes) stay between a launcher
and its own children on one machine; nothing a peer rank sends is unpickled.
"""

from gnncore.distributed.launch.faults import RankFailed, RankStatus, blame, is_peer_loss
from gnncore.distributed.launch.net import LOCALHOST, free_port
from gnncore.distributed.launch.spawn import spawn_local
from gnncore.distributed.launch.torchrun import elastic_run, rank_entry

__all__ = [
    "LOCALHOST",
    "RankFailed",
    "RankStatus",
    "blame",
    "elastic_run",
    "free_port",
    "is_peer_loss",
    "rank_entry",
    "spawn_local",
]
