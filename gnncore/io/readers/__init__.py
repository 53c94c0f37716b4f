"""Readers of dataset formats, each writing a graph directory in memory.

* :mod:`~gnncore.io.readers.edgelist` -- text edge lists (the layout:
  :mod:`~gnncore.io.readers.edge_layout`; bad lines:
  :mod:`~gnncore.io.readers.edge_problems`; the C++ reader of integer ids:
  :mod:`~gnncore.io.readers.edge_text`);
* :mod:`~gnncore.io.readers.parquet` -- Parquet edge tables;
* :mod:`~gnncore.io.readers.node_table` -- node tables (features, labels, splits);
* :mod:`~gnncore.io.readers.ogb`, :mod:`~gnncore.io.readers.planetoid`,
  :mod:`~gnncore.io.readers.kg` -- dataset directories.

The bounded-memory path for text edge lists is :mod:`gnncore.io.ingest`.
"""
