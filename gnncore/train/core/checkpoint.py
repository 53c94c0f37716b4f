r"""Per-epoch training checkpoints: atomic writes, safe loads, newest-valid lookup.

A checkpoint directory holds ``epoch-<k>.pt`` files, one per finished epoch,
of which the newest ``keep`` are kept. Each file is written to a temporary
sibling, flushed to disk and renamed, so a file with the final name is always
complete; a process killed mid-write leaves a stray ``.epoch-<k>.pt.*.tmp``
that the next run removes.

A checkpoint is a plain ``dict`` of tensors and primitive values (config as a
dict, RNG states as tensors and numbers) and is read with
``torch.load(..., weights_only=True)`` only, which refuses to unpickle
arbitrary objects: a checkpoint file is data, never code. Its keys:

* ``format``, ``version``, ``epoch``: what the file is and which epoch ended.
* ``config``: :meth:`NodeTrainConfig.to_dict`; ``data``: a fingerprint of the
  splits (:func:`data_fingerprint`); ``run_id``: the tracked run, if any.
* ``model``, ``optimizer``, ``scaler``: state dicts (``scaler``: fp16 AMP only).
* ``progress``: per-epoch history, best epoch and weights, early-stopping count.
* ``rng``: :func:`capture_rng` (torch CPU and CUDA, NumPy, ``random``, the
  shuffling generator, the samplers' batch counters).
* ``files`` (optional): records of the files attached to the checkpoint.

State too large for the ``.pt`` (a partition buffer's embedding table on disk)
is attached as files ``epoch-<k>.<name>`` beside ``epoch-<k>.pt``
(:meth:`CheckpointDir.attach`): each is written to a temporary sibling,
flushed and renamed *before* the checkpoint file, which records its name,
size and sha256, so a checkpoint that exists has all its files in place (a
crash in between leaves files of an epoch without a checkpoint, removed by a
later save). Files are never modified once attached, so a later checkpoint
may hard-link an earlier one's (:meth:`CheckpointDir.attach_link`). They go
when their checkpoint is pruned, and :meth:`CheckpointDir.restore_file`
checks size and sha256 while copying one back.

A fresh run (:meth:`CheckpointDir.start_fresh`) writes into a directory that
may hold a previous run's checkpoints. It leaves them in place, untouched,
until its own first checkpoint is written (atomically, as every one is); that
save then removes every file of the previous run. A run that fails before its
first checkpoint (at batch 0, say) so loses nothing, and ``--resume`` still
finds the previous run's newest checkpoint. The fresh run tells its own files
apart by name: it records every file it wrote, and :meth:`CheckpointDir.latest`
returns nothing until it has written one; a launcher that restarts a failed
fresh run (``--max-restarts``) resumes only once :meth:`CheckpointDir.identity`
shows a checkpoint written since the run began. One exception keeps the rule that a
checkpoint never outlives its attached files: attaching a file to epoch ``k``
first removes the previous run's ``epoch-<k>.pt``, whose file of that name is
about to be replaced.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import tempfile
import warnings
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnncore.errors import GnnCoreError
from gnncore.names import safe_name
from gnncore.train.core.config import ConfigError

FORMAT = "gnncore.checkpoint"
VERSION = 1
_NAME = re.compile(r"^epoch-(\d+)\.pt$")
#: A checkpoint file or a file attached to it.
_OF_EPOCH = re.compile(r"^epoch-(\d+)\.(.+)$")
_TEMP = re.compile(r"^\.epoch-\d+\..*\.tmp$")
_BLOCK = 1 << 23
REQUIRED_KEYS = (
    "format",
    "version",
    "epoch",
    "config",
    "data",
    "model",
    "optimizer",
    "progress",
    "rng",
)


class CheckpointError(GnnCoreError, ValueError):
    """A checkpoint that cannot be used for this run (says which file and why)."""


def default_checkpoint_dir(
    data_root: str | os.PathLike[str], dataset: str, model: str, seed: int
) -> Path:
    """``<data_root>/checkpoints/<dataset>-<model>-seed<seed>``.

    Raises:
        InputError: When ``dataset`` or ``model`` is not a safe name
            (:func:`gnncore.names.safe_name`), so the directory stays under
            ``<data_root>/checkpoints``.
    """
    safe_name(dataset, what="dataset name")
    safe_name(model, what="model name")
    return Path(data_root) / "checkpoints" / f"{dataset}-{model}-seed{int(seed)}"


@dataclass(frozen=True)
class Checkpoint:
    """One loaded checkpoint file."""

    path: Path
    epoch: int
    state: dict[str, Any]


class CheckpointDir:
    r"""The ``epoch-<k>.pt`` files of one training run.

    Args:
        directory (str or PathLike): Where the files live (created on first save).
        keep (int, optional): How many of the newest checkpoints to keep.
            (default: :obj:`2`)
    """

    def __init__(self, directory: str | os.PathLike[str], keep: int = 2) -> None:
        if int(keep) < 1:
            raise ValueError(f"keep={keep}: must keep at least one checkpoint")
        self.directory = Path(directory)
        self.keep = int(keep)
        self._latest: Checkpoint | None = None
        self._scanned = False
        # A fresh run's state until its first save: the files it wrote (the
        # others are the previous run's, kept until then), None outside one.
        self._fresh: set[str] | None = None

    def path(self, epoch: int) -> Path:
        return self.directory / f"epoch-{epoch}.pt"

    def epochs(self) -> list[int]:
        """Epochs with a checkpoint file, ascending."""
        if not self.directory.is_dir():
            return []
        found = (_NAME.match(p.name) for p in self.directory.iterdir())
        return sorted(int(m.group(1)) for m in found if m is not None)

    def save(self, epoch: int, state: Mapping[str, Any]) -> Path:
        """Write ``state`` as ``epoch-<epoch>.pt`` atomically, then drop the files
        (checkpoints and their attached files) of older epochs beyond :attr:`keep`
        and of later epochs, which belong to an abandoned attempt."""

        def write(tmp: Path) -> None:
            with tmp.open("wb") as fh:
                torch.save(dict(state), fh)
                fh.flush()
                os.fsync(fh.fileno())

        final = self.path(epoch)
        _publish(final, write)
        if self._fresh is not None:
            # A fresh run's first checkpoint is in place: the previous run's files go.
            ours = self._fresh | {final.name}
            self._fresh = None
            stale = (p for p in self._epoch_files() if p.name not in ours)
        else:
            kept = set([e for e in self.epochs() if e <= epoch][-self.keep :])
            stale = (p for p in self._epoch_files() if _epoch_of(p) not in kept)
        # Checkpoint files first: a checkpoint never outlives its attached files.
        for path in sorted(stale, key=lambda p: not _NAME.match(p.name)):
            path.unlink(missing_ok=True)
        self._latest, self._scanned = None, False
        return final

    def start_fresh(self) -> None:
        """Begin a fresh run here: the checkpoints already in the directory (a
        previous run's) stay untouched until this run's first :meth:`save`,
        which removes them once its own checkpoint is written; until then
        :meth:`latest` is ``None`` (nothing of this run to resume from). Stray
        temporary files of unfinished writes are removed now."""
        self.remove_temporaries()
        self._fresh = set()
        self._latest, self._scanned = None, True

    def _claim(self, final: Path) -> None:
        """Before a fresh run's first checkpoint writes ``final`` (a file attached
        to epoch ``k``): remove the previous run's ``epoch-<k>.pt``, whose file
        of that name is about to be replaced, and count ``final`` as this run's."""
        if self._fresh is None:
            return
        checkpoint = self.path(_epoch_of(final))
        if checkpoint.name not in self._fresh:
            checkpoint.unlink(missing_ok=True)
        self._fresh.add(final.name)

    def identity(self) -> frozenset[tuple[str, int, int]]:
        """The checkpoint files here as ``(name, inode, mtime in ns)``. Every
        checkpoint is a new file renamed into place, so two identities differ
        exactly when a checkpoint was written or removed in between: a launcher
        that restarts a fresh run tells by it whether the run has a checkpoint of
        its own to resume (the files it found are a previous run's)."""
        out = set()
        for epoch in self.epochs():
            try:
                stat = self.path(epoch).stat()
            except FileNotFoundError:  # removed since the listing
                continue
            out.add((self.path(epoch).name, stat.st_ino, stat.st_mtime_ns))
        return frozenset(out)

    def attached(self, epoch: int, name: str) -> Path:
        """Where the file ``name`` attached to epoch ``epoch``'s checkpoint lives."""
        if not name or name == "pt" or Path(name).name != name:
            raise ValueError(f"{name!r}: not a name for a file attached to a checkpoint")
        return self.directory / f"epoch-{epoch}.{name}"

    def attach(self, epoch: int, name: str, source: str | os.PathLike[str]) -> dict[str, Any]:
        """Copy ``source`` to :meth:`attached` atomically (call before :meth:`save`
        of ``epoch``); returns its record for the checkpoint to hold:
        ``{"name", "bytes", "sha256"}``."""
        final = self.attached(epoch, name)
        self._claim(final)
        digest, size = _publish(final, lambda tmp: _copy(Path(source), tmp))
        return {"name": final.name, "bytes": size, "sha256": digest}

    def attach_link(self, epoch: int, name: str, record: Mapping[str, Any]) -> dict[str, Any]:
        """The file of ``record`` (attached to another checkpoint here) attached to
        ``epoch``'s as well: a hard link (attached files are never modified), or a
        copy checked against ``record`` where links are not possible.

        Raises:
            CheckpointError: When the file is missing or does not match ``record``.
        """
        final = self.attached(epoch, name)
        existing = self._recorded(record)
        self._claim(final)

        def write(tmp: Path) -> None:
            tmp.unlink()
            try:
                os.link(existing, tmp)
            except OSError:
                _copy_checked(existing, record, tmp)

        _publish(final, write)
        return {**record, "name": final.name}

    def restore_file(self, record: Mapping[str, Any], target: str | os.PathLike[str]) -> None:
        """Copy the attached file of ``record`` over ``target`` (a temporary beside
        it, renamed), checking its size and sha256 on the way.

        Raises:
            CheckpointError: When the file is missing, truncated or damaged
                (one line naming the file); ``target`` is then left as it was.
        """
        _publish(Path(target), lambda tmp: _copy_checked(self._recorded(record), record, tmp))

    def _recorded(self, record: Mapping[str, Any]) -> Path:
        name = str(record.get("name", ""))
        match = _OF_EPOCH.match(name)
        if match is None or Path(name).name != name or match.group(2) == "pt":
            raise CheckpointError(f"{self.directory}: a checkpoint records the file {name!r}")
        return self.directory / name

    def _epoch_files(self) -> list[Path]:
        """Checkpoint files and the files attached to them."""
        if not self.directory.is_dir():
            return []
        return [p for p in self.directory.iterdir() if _OF_EPOCH.match(p.name)]

    def load(self, path: str | os.PathLike[str]) -> Checkpoint:
        """Load one file with ``weights_only=True`` and check its layout.

        Raises:
            CheckpointError: When the file is unreadable, truncated, not a
                gnncore checkpoint, or of another format version.
        """
        path = Path(path)
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # truncated, corrupt, or holds non-tensor objects
            raise CheckpointError(
                f"{path}: cannot be read as a checkpoint ({type(exc).__name__}: {str(exc)[:200]})"
            ) from exc
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            raise CheckpointError(f"{path}: not a gnncore checkpoint")
        if state.get("version") != VERSION:
            raise CheckpointError(
                f"{path}: checkpoint version {state.get('version')!r}, "
                f"this gnncore reads version {VERSION}"
            )
        missing = [key for key in REQUIRED_KEYS if key not in state]
        if missing:
            raise CheckpointError(f"{path}: checkpoint lacks {missing}")
        return Checkpoint(path, int(state["epoch"]), state)

    def latest(self) -> Checkpoint | None:
        """The newest checkpoint that loads; unreadable newer files are skipped
        with a warning. ``None`` when there is none. Cached until :meth:`save`."""
        if not self._scanned:
            self._latest, self._scanned = None, True
            for epoch in reversed(self.epochs()):
                try:
                    self._latest = self.load(self.path(epoch))
                    break
                except CheckpointError as exc:
                    warnings.warn(f"skipping checkpoint: {exc}", RuntimeWarning, stacklevel=2)
        return self._latest

    def clear(self) -> None:
        """Remove every checkpoint, attached file and stray temporary file at once
        (a fresh run keeps them until its first checkpoint instead:
        :meth:`start_fresh`)."""
        self.remove_temporaries()
        for path in sorted(self._epoch_files(), key=lambda p: not _NAME.match(p.name)):
            path.unlink(missing_ok=True)
        self._latest, self._scanned = None, False

    def remove_temporaries(self) -> None:
        """Remove the temporary files of writes that never finished."""
        if self.directory.is_dir():
            for path in self.directory.iterdir():
                if _TEMP.match(path.name):
                    path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.directory)!r}, keep={self.keep})"


def _epoch_of(path: Path) -> int:
    match = _OF_EPOCH.match(path.name)
    assert match is not None
    return int(match.group(1))


def _publish(final: Path, write: Callable[[Path], Any]) -> Any:
    """``write(tmp)`` to a temporary sibling of ``final`` (it must leave a complete,
    flushed file there), then rename it to ``final``; returns what ``write`` did."""
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        os.chmod(tmp, 0o644)  # mkstemp makes it owner-only
        out = write(tmp)
        os.replace(tmp, final)
        # rename(2) does nothing when both names link the same file (a hard link
        # made again, attach_link): ``final`` is then already right.
        tmp.unlink(missing_ok=True)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_directory(final.parent)
    return out


def _copy(source: Path, target: Path) -> tuple[str, int]:
    """Copy ``source`` to ``target`` (flushed to disk); ``(sha256 hex, bytes)``."""
    digest, size = hashlib.sha256(), 0
    with source.open("rb") as src, target.open("wb") as dst:
        while block := src.read(_BLOCK):
            digest.update(block)
            dst.write(block)
            size += len(block)
        dst.flush()
        os.fsync(dst.fileno())
    return digest.hexdigest(), size


def _copy_checked(source: Path, record: Mapping[str, Any], target: Path) -> None:
    """:func:`_copy`, raising :class:`CheckpointError` (one line naming ``source``)
    unless ``source`` is the file ``record`` describes."""
    size, sha = int(record["bytes"]), str(record["sha256"])
    try:
        found = source.stat().st_size
    except OSError:
        raise CheckpointError(
            f"{source}: missing (its checkpoint records this file, {size} bytes)"
        ) from None
    if found != size:
        raise CheckpointError(
            f"{source}: truncated or damaged ({found} bytes, its checkpoint records {size})"
        )
    digest, _ = _copy(source, target)
    if digest != sha:
        raise CheckpointError(
            f"{source}: damaged (sha256 {digest[:16]}..., its checkpoint records {sha[:16]}...)"
        )


def _fsync_directory(directory: Path) -> None:
    """Make the rename durable (best effort; not every platform allows it)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# Compatibility checks ----------------------------------------------------------


def data_fingerprint(
    splits: Sequence[torch.Tensor], num_classes: int, in_channels: int
) -> dict[str, Any]:
    """Sizes and CRC-32 of the split node ids, with the class and feature counts:
    enough to tell that a checkpoint was written for other data."""
    out: dict[str, Any] = {"num_classes": int(num_classes), "in_channels": int(in_channels)}
    for name, index in zip(("train", "val", "test"), splits):
        array = np.ascontiguousarray(index.detach().cpu().numpy().astype(np.int64, copy=False))
        out[f"num_{name}"] = int(array.size)
        out[f"{name}_crc32"] = int(zlib.crc32(array.tobytes()))
    return out


def check_resumable(checkpoint: Checkpoint, config: Any, fingerprint: Mapping[str, Any]) -> None:
    """Raise :class:`CheckpointError` when ``checkpoint`` was written with other
    settings (the options declared ``resumable``) or other data."""
    problems = list(config.mismatches(dict(checkpoint.state["config"])))
    saved = dict(checkpoint.state["data"])
    problems += [
        f"data {key}: {saved.get(key)!r} (checkpoint) != {value!r} (this run)"
        for key, value in fingerprint.items()
        if saved.get(key) != value
    ]
    if problems:
        raise CheckpointError(
            f"{checkpoint.path} was written by a different training run, so it cannot be "
            f"resumed: {'; '.join(problems)}. Resume with the same settings and data, or "
            "start afresh (without --resume) or in another --checkpoint-dir"
        )


def open_checkpoints(
    checkpoint_dir: str | os.PathLike[str] | None,
    resume: bool,
    keep: int,
    config: Any,
    fingerprint: Callable[[], Mapping[str, Any]],
) -> tuple[CheckpointDir | None, Checkpoint | None]:
    """A run's checkpoint directory and, with ``resume``, its newest checkpoint,
    refused (before any run is created) when it was written by another
    configuration or other data (``fingerprint()``).

    Raises:
        ConfigError: ``resume`` without a checkpoint directory.
        CheckpointError: The newest checkpoint is of another run.
    """
    if resume and checkpoint_dir is None:
        raise ConfigError("resume needs a checkpoint directory (checkpoint_dir=...)")
    checkpoints = None if checkpoint_dir is None else CheckpointDir(checkpoint_dir, keep=keep)
    previous = checkpoints.latest() if (resume and checkpoints is not None) else None
    if previous is not None:
        check_resumable(previous, config, fingerprint())
    return checkpoints, previous


# RNG state ---------------------------------------------------------------------


def capture_rng(
    generator: torch.Generator | None = None,
    samplers: Mapping[str, Any] | None = None,
    cuda: bool = False,
) -> dict[str, Any]:
    """Every random state a training epoch draws from, as tensors and numbers.

    Args:
        generator (torch.Generator, optional): The shuffling generator.
        samplers (Mapping, optional): Name -> sampler; a sampler's state is its
            ``state_dict()`` when it has one, else its batch counter
            (:attr:`gnncore.sampler.NeighborSampler.num_batches`).
        cuda (bool, optional): Include the CUDA generators of every device.
    """
    version, mt_state, gauss = random.getstate()
    np_state = np.random.get_state(legacy=True)
    assert isinstance(np_state, tuple)
    _, keys, pos, has_gauss, cached = np_state
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "python": {
            "version": int(version),
            "state": torch.tensor(mt_state, dtype=torch.int64),
            "gauss_next": gauss,
        },
        "numpy": {
            "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "generator": generator.get_state() if generator is not None else None,
        "samplers": {name: _sampler_state(s) for name, s in (samplers or {}).items()},
    }
    if cuda and torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(
    state: Mapping[str, Any],
    generator: torch.Generator | None = None,
    samplers: Mapping[str, Any] | None = None,
) -> None:
    """Put back what :func:`capture_rng` recorded."""
    torch.set_rng_state(state["torch"])
    py = state["python"]
    random.setstate((py["version"], tuple(int(v) for v in py["state"].tolist()), py["gauss_next"]))
    npy = state["numpy"]
    np.random.set_state(
        (
            "MT19937",
            npy["keys"].numpy().astype(np.uint32),
            npy["pos"],
            npy["has_gauss"],
            npy["cached_gaussian"],
        )
    )
    if generator is not None and state.get("generator") is not None:
        generator.set_state(state["generator"])
    saved = state.get("samplers", {})
    for name, sampler in (samplers or {}).items():
        if name in saved:
            _load_sampler_state(sampler, saved[name])
    cuda = state.get("cuda")
    if cuda is not None and torch.cuda.is_available():
        if len(cuda) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda)
        else:
            warnings.warn(
                f"checkpoint holds {len(cuda)} CUDA RNG states, this machine has "
                f"{torch.cuda.device_count()} devices; CUDA RNG not restored",
                RuntimeWarning,
                stacklevel=2,
            )


def _sampler_state(sampler: Any) -> dict[str, Any]:
    if callable(getattr(sampler, "state_dict", None)):
        return dict(sampler.state_dict())
    if isinstance(getattr(sampler, "num_batches", None), int):
        return {"num_batches": int(sampler.num_batches)}
    return {}


def _load_sampler_state(sampler: Any, state: Mapping[str, Any]) -> None:
    if callable(getattr(sampler, "load_state_dict", None)):
        sampler.load_state_dict(state)
    elif "num_batches" in state and hasattr(sampler, "_num_batches"):
        # gnncore.sampler.NeighborSampler derives batch k's seed from (seed, k) and
        # exposes the counter read-only; set it so the next batch gets the next seed.
        sampler._num_batches = int(state["num_batches"])
