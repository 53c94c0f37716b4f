"""Bounded-memory ingestion of text edge lists (the entry point:
:func:`~gnncore.io.bounded.text_ingest.ingest_edgelist_external`), with integer ids
(string ids: :mod:`gnncore.io.bounded.string_ids`, which the integer path hands them to).

``ingest(..., memory_budget=SIZE)`` / ``gnncore ingest --memory-budget SIZE``
selects this path (only on request: without a budget ingestion runs in memory
as before). It writes the same graph directory as the in-memory path -- the
same files, byte for byte, and the same manifest -- in memory bounded by the
budget plus O(|V|) arrays (below), spilling to disk beside the output:

1. **parse**: the C++ reader of :mod:`gnncore.io.readers.edge_text` hands the file
   over in blocks of int64 ids; it parses a strict subset of what Polars
   accepts and declines the rest, and then the whole file goes to Polars'
   streaming CSV reader in batches (``collect_batches``), each batch checked
   (a bad line is an :class:`~gnncore.errors.InputError` naming the file and
   line, found as the in-memory path finds it). Each block's ids are
   collected (a presence array while the largest id is small -- dense ids --,
   else sorted runs of distinct ids merged from disk) and its edges go
   straight into a
   :class:`~gnncore.store.edge_keys.KeySorter` as packed keys ``min << 32 | max``
   (directed: ``src << 32 | dst``) of the *raw* ids, self-loops dropped.
2. **sort/dedup**: the keys are radix-sorted and deduplicated in C++ (two
   threads, GIL released), spilled as sorted key runs (delta-coded, 3-5 bytes a
   key) and merged k ways when they pass half the budget.
3. **remap**: the distinct ids, sorted, are the node ids (``node_ids``); the
   sorted keys are mapped through a lookup table (dense ids) or a binary search
   of the sorted ids. Node ids are ranks of raw ids, so the keys stay sorted.
4. **csr** (and **write**): ``edges.parquet`` is streamed from the sorted keys
   on a thread (pyarrow, delta-coded columns: :mod:`gnncore.store.edge_table`,
   the bytes of the in-memory path's whole table), while
   ``indptr``/``indices``/``eid`` are built: keys in memory are merged with
   their sorted transpose (``gnncore._C.merge_csr_rows``, both read
   sequentially). Keys on disk are mapped to node ids once (phase
   ``remap``: one pass writes the mapped run in place of the raw one and counts
   each node's ends, :func:`~gnncore.io.bounded.csr.map_key_run`), then fill row
   ranges of half the budget in two sequential passes whatever their number:
   one writes each range's keys by minor id (``gnncore._C.split_key_run``), the
   other fills each range from them and the next keys of the mapped run
   (``gnncore._C.fill_csr_range``). ``write`` is the wait for the Parquet
   thread after the CSR.
5. **shuffle**: ``edges_shuffled.npy`` is numpy's seeded permutation of the
   unordered pairs, exactly as the in-memory path draws it, but drawn by a C++
   copy of ``Generator(PCG64).shuffle`` (:func:`~gnncore.store.edge_keys.shuffle_keys`)
   on a copy of the keys in memory, when they are in memory or fit half the
   budget (or :data:`~gnncore.io.bounded.shuffle.EXACT_SHUFFLE_BYTES`). Past that the
   order is the bounded scatter shuffle of :func:`~gnncore.store.edge_keys.bucket_shuffle`
   (uniformly random and seeded, but another order than numpy's): the keys go to seeded
   random buckets written as key runs, and each bucket is shuffled in memory;
   the manifest then records ``stats.shuffle_buckets``. The buckets are
   written before the canonical keys' run is removed, and each bucket file is
   removed once read. Keys in memory are shuffled and written *before* the
   CSR: the draws are one thread, so the ``edges.parquet`` thread has the other
   core, and the CSR's threads then run beside what is left of it.
6. **checksums**: ``edges_shuffled.npy``, and ``indptr``/``indices``/``eid`` of
   keys in memory, are hashed from their buffers as they are written (on the
   writing threads) and written past the page cache
   (:class:`~gnncore.store.direct_write.DirectWriter`: on a VM the copy into
   fresh page-cache pages cost more than the hash); the CSR of keys on disk is
   written past the page cache too and hashed afterwards, read past it
   (:mod:`gnncore.store.direct_read`), and ``edges.parquet`` and the node data
   are hashed once finished, all on a background thread
   (:mod:`gnncore.io.bounded.csr_sink` says why); the manifest and the
   validation come last. The CSR's row ranges and the shuffled pairs
   are checked as they are written (:mod:`gnncore.store.write_checks`, on the
   writing threads: ``gnncore.io.bounded.csr_sink``), so the validation reads
   none of these arrays back (only the node data, the manifest and the headers).

Ids of ``2**32`` and more do not fit a key: the file is then parsed again
into two raw id files, mapped chunk by chunk and sorted as int64 pair runs (the
general path, :mod:`~gnncore.io.bounded.pair_graph`).

Steps 2 and 4-6 are :func:`~gnncore.io.bounded.stream.write_edge_stream` /
:func:`~gnncore.io.bounded.stream.write_key_graph`:
``write_edge_stream`` takes any stream of ``(src, dst)`` chunks over node ids
``0..N-1`` (bounded-memory generation,
``gnncore.synth.generate_graph(..., memory_budget=)``, feeds it the
generator's); ingestion fills the key sorter itself and calls
``write_key_graph`` with the remap.

The output is written into a temporary sibling renamed into place at the end
(:func:`gnncore.store.create_graph_dir`); the scratch files live in another
sibling, ``.NAME.ingest-PID-XXXXXXXX`` (``.NAME.synth-...`` when generating:
:func:`~gnncore.io.bounded.scratch.scratch_directory`), removed on success and on error. A
killed run leaves both behind; the next run into the same output removes those whose
process is gone.

O(|V|) memory, outside the budget: the sorted distinct ids (8 bytes per node;
plus a 5-byte-per-slot lookup table up to the largest id when ids are dense, or a
4-byte one when they fill a quarter of ``0..max`` past the presence array's limit:
:func:`~gnncore.io.bounded.ids.dense_lookup`), until the keys are mapped (keys on
disk: the ``remap`` pass; :class:`~gnncore.io.bounded.parse.KeyRemap` then drops
them, and ``node_ids.parquet``'s writer its own reference once written).
The CSR's per-node offsets and edge-rank counters (16 bytes per node) are
taken from the budget: the row ranges get half of what they leave (at most
:data:`~gnncore.io.bounded.csr.MAX_ROW_RANGES` ranges), and they are dropped
before the shuffle, whose bucket is half the budget. Also outside it: the
Parquet thread's blocks (a few ``batch_rows`` blocks of keys and their
columns) and the interpreter. Freed buffers go back to the system at once
(:func:`gnncore.heap.fix_mmap_threshold`), not kept in the heap, where the
budget would still count them. Nothing of ids below ``2**32`` is read through a
memory map (mapped pages count in the process's memory and its cgroup): runs
are read in blocks, the shuffle's scratch is bucket files read whole, the
validation reads the arrays in blocks (the general path past ``2**32`` nodes
still maps its pair runs). String ids
(``id_type="string"``, or ``"auto"`` when Polars reads no layout's ids as
integers, as the in-memory path decides) go to
:func:`gnncore.io.bounded.string_ids.ingest_string_ids` in the same scratch directory;
a Parquet node table with integer ids is read by
:mod:`gnncore.io.bounded.node_table` (its features laid out before the parse);
other node tables and Parquet inputs are ingested in memory for now (asking for a
budget with them is an error).
"""
