"""Launching ranks through torch's elastic launcher: a rank killed mid-epoch,
restarts from the checkpoint, and two machines (network namespaces) for real."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import planted_graph
from gnncore.distributed.launch import RankStatus, blame
from gnncore.partition.run import partition_graph
from tests.processes import rank_pids

REPO = Path(__file__).resolve().parents[3]
TRAIN = ["--epochs", "4", "--batch-size", "16", "--fanouts", "5,5", "--hidden", "32",
         "--no-progress"]  # fmt: skip


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("dist-launch")
    g = planted_graph(root / "g", num_nodes=1200, degree=8)
    partition_graph(g, root / "p", method="random", parts=2)
    return g, root / "p"


def test_blame_prefers_the_dead_rank_to_the_ones_that_lost_it() -> None:
    lost = RankStatus(0, exitcode=1, error="RuntimeError: Connection reset by peer", peer_loss=True)
    dead = RankStatus(1, exitcode=-9)
    err = blame([lost, dead], 2)
    assert err.rank == 1
    assert str(err).startswith("rank 1 of 2 exited with code -9 without a result (killed by")
    assert "rank 0: lost its peers" in str(err)
    own = RankStatus(1, exitcode=1, error="ValueError: bad")
    assert blame([lost, own], 2).rank == 1
    # Only peer losses here, the other ranks on other machines: say so.
    err = blame([lost], 2, remote=[1])
    assert err.rank == 0 and "ranks [1] run on other machines" in str(err)


def _rank_pid(rank: int) -> int | None:
    """The pid of the process that runs ``rank`` among this process's descendants."""
    found = rank_pids(rank)
    return found[0] if found else None


class Killer(threading.Thread):
    """SIGKILLs rank ``rank`` once, mid-epoch: shortly after the first
    checkpoint appears (the ranks are then in epoch 2)."""

    def __init__(self, ckpt: Path, rank: int = 1, delay: float = 0.3) -> None:
        super().__init__(daemon=True)
        self.ckpt, self.rank, self.delay = ckpt, rank, delay
        self.killed_at: float | None = None
        self.epoch: int | None = None  # the newest checkpoint when it killed

    def run(self) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(self.ckpt.glob("epoch-*.pt")):
            time.sleep(0.02)
        time.sleep(self.delay)
        pid = _rank_pid(self.rank)
        if pid is None:
            return
        self.epoch = max(int(p.stem.split("-")[1]) for p in self.ckpt.glob("epoch-*.pt"))
        os.kill(pid, signal.SIGKILL)
        self.killed_at = time.monotonic()


def _cli(g: Path, part: Path, tmp: Path, *extra: str) -> tuple[int, Path, Path]:
    from gnncore.cli.main import main

    out, ckpt = tmp / "run.json", tmp / "ckpt"
    argv = ["train", str(g), "--nproc", "2", "--partition", str(part), *TRAIN,
            "--checkpoint-dir", str(ckpt), "--json", str(out), "--data-root", str(tmp / "data"),
            *extra]  # fmt: skip
    return main(argv), out, ckpt


def _only_run(tmp: Path):
    import mlflow

    from gnncore.tracking import default_tracking_uri

    client = mlflow.MlflowClient(default_tracking_uri(tmp / "data"))
    (experiment,) = [e for e in client.search_experiments() if e.name == "gnncore"]
    (run,) = client.search_runs([experiment.experiment_id])
    return run


def test_a_rank_killed_mid_epoch_stops_the_job_naming_it(graph, tmp_path, capsys) -> None:
    g, part = graph
    killer = Killer(tmp_path / "ckpt")
    killer.start()
    code, out, _ = _cli(g, part, tmp_path)
    stopped = time.monotonic()
    killer.join(timeout=5)
    assert killer.killed_at is not None, "rank 1 was never found to kill"
    assert code == 1 and not out.exists()
    err = capsys.readouterr().err
    assert "rank 1 of 2 exited with code -9 without a result (killed by SIGKILL)" in err, err
    assert stopped - killer.killed_at < 60
    run = _only_run(tmp_path)
    assert run.info.status == "FAILED"


def test_max_restarts_resumes_from_the_checkpoint_and_finishes(graph, tmp_path, capsys) -> None:
    g, part = graph
    killer = Killer(tmp_path / "ckpt")
    killer.start()
    code, out, _ = _cli(g, part, tmp_path, "--max-restarts", "1")
    killer.join(timeout=5)
    assert killer.killed_at is not None and killer.epoch is not None
    assert code == 0, capsys.readouterr().err
    assert "restart 1 of 1 after: rank 1 of 2 exited with code -9" in capsys.readouterr().err
    summary = json.loads(out.read_text())
    # The newest checkpoint when rank 1 died; rank 0 may still have written the
    # next one if the kill landed after the epoch's last collective.
    assert killer.epoch <= summary["resumed_from_epoch"] <= killer.epoch + 1
    assert 1 <= summary["resumed_from_epoch"] < 4
    assert summary["stopped_epoch"] == 4
    assert summary["test_accuracy"] > 0.8  # 4 classes: far above chance
    run = _only_run(tmp_path)
    assert run.info.status == "FINISHED" and run.data.tags["restarts"] == "1"
    assert run.data.params["max_restarts"] == "1"


# Two machines: two network namespaces joined by a veth pair ------------------------


def _netns_unavailable() -> str | None:
    if sys.platform != "linux":
        return "network namespaces are Linux only"
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    probe = f"gnc-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` fails here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "delete", probe], capture_output=True)
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


ADDRESSES = ("10.200.0.1", "10.200.0.2")


def test_two_machines_in_network_namespaces_match_one_machine(graph, tmp_path) -> None:
    reason = _netns_unavailable()
    if reason is not None:
        pytest.skip(reason)
    from gnncore.distributed.rank_write import write_rank_data
    from gnncore.distributed.training import DistributedConfig, train_distributed
    from gnncore.train import NodeTrainConfig

    g, part = graph
    ranks = write_rank_data(g, part, tmp_path / "ranks")  # as `gnncore ranks` would
    tag = str(os.getpid())[-6:]
    spaces = [f"gnc{tag}a", f"gnc{tag}b"]
    links = [f"gv{tag}a", f"gv{tag}b"]
    procs: list[subprocess.Popen] = []
    try:
        for ns in spaces:
            _ip("netns", "add", ns)
        _ip("link", "add", links[0], "type", "veth", "peer", "name", links[1])
        for ns, link, addr in zip(spaces, links, ADDRESSES, strict=True):
            _ip("link", "set", link, "netns", ns)
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", link)
            _ip("-n", ns, "link", "set", link, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        port = "29533"
        # The machines' shared secret: without it machine 1 would refuse to start.
        env = {**os.environ, "PYTHONPATH": str(REPO), "GNNCORE_JOIN_TOKEN": secrets.token_hex(32)}
        for node, ns in enumerate(spaces):
            argv = ["ip", "netns", "exec", ns, str(REPO / ".venv/bin/gnncore"), "train", str(g),
                    "--nproc", "1", "--nnodes", "2", "--node-rank", str(node),
                    "--master-addr", ADDRESSES[0], "--master-port", port,
                    "--partition", str(part), "--ranks-dir", str(ranks), *TRAIN,
                    "--data-root", str(tmp_path / "data"),
                    "--json", str(tmp_path / f"node{node}.json")]  # fmt: skip
            procs.append(
                subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            )
        logs = []
        for proc in procs:
            out, _ = proc.communicate(timeout=150)
            logs.append(out.decode(errors="replace")[-3000:])
        assert [p.returncode for p in procs] == [0, 0], "\n---\n".join(logs)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for ns in spaces:  # deleting a namespace deletes its end of the veth pair, and the pair
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
    node0 = json.loads((tmp_path / "node0.json").read_text())
    node1 = json.loads((tmp_path / "node1.json").read_text())
    assert node0["world_size"] == node1["world_size"] == 2 and node1["ranks"] == [1]
    assert node1["test_accuracy"] == node0["test_accuracy"]  # reduced: the same on every rank
    # The same settings on one machine, 2 ranks (CLI defaults of TRAIN's flags).
    config = NodeTrainConfig(epochs=4, batch_size=16, fanouts=(5, 5), hidden=32)
    one = train_distributed(g, part, config, DistributedConfig(nproc=2, ranks_dir=ranks))
    assert node0["test_accuracy"] == pytest.approx(one.test_accuracy, abs=1e-9)
    assert node0["stopped_epoch"] == one.stopped_epoch == 4


def _parent_pid(rank: int, world: int) -> int:
    return os.getppid()


def test_cuda_ranks_start_fresh_not_from_the_fork_server() -> None:
    """A process forked from one that touched the CUDA driver cannot use it, so
    ranks on CUDA, and every rank on a machine with a GPU, are spawned by the
    launcher itself; elsewhere they fork from the fork server (their parent is
    that server)."""
    from gnncore.distributed.launch import spawn_local
    from gnncore.forkserver import nvidia_gpu_present

    assert spawn_local(_parent_pid, 1, cuda=True, timeout=30, run_timeout=120) == [os.getpid()]
    forked = spawn_local(_parent_pid, 1, timeout=30, run_timeout=120) != [os.getpid()]
    assert forked == (not nvidia_gpu_present())
