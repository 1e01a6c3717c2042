"""Sizes and values gpuplan accepts, so hostile or mistaken input fails fast.

Each limit is far above any real institute (thousands of GPUs, ~150 users, weeks of
work), and low enough that a scenario inside all of them loads in seconds and in a few
hundred MB. ``docs/scenarios.md`` lists them for users; an input past one fails with a
message that names the file and the field.
"""

from __future__ import annotations

MAX_YAML_BYTES = 16 * 1024 * 1024
"""Largest scenario or sweep file read (16 MiB: some 100,000 inline jobs)."""

MAX_TABLE_BYTES = 64 * 1024 * 1024
"""Largest CSV job file or Philly trace read (64 MiB)."""

MAX_YAML_DEPTH = 64
"""Deepest nesting of YAML collections (an org tree of about 30 levels)."""

MAX_ALIAS_EXPANSION = 100_000
"""Most YAML nodes that aliases (``*name``) may add beyond the nodes written out."""

MAX_NODES_PER_GROUP = 10_000
MAX_GPUS_PER_NODE = 64
MAX_NODES = 100_000
"""Most nodes in a scenario, all clusters together."""

MAX_GPUS = 1_000_000
"""Most GPUs in a scenario, all clusters together (also the largest gang)."""

MAX_JOBS = 1_000_000
"""Most jobs in a scenario, from any workload source."""

MAX_DAYS = 3650.0
"""Longest time value, in days (ten years): submit times, durations, policy times."""

MAX_SECONDS = MAX_DAYS * 86400.0

MAX_GENERATE_DAYS = 366.0
MAX_GENERATE_USERS = 100_000
MAX_GENERATE_LOAD = 100.0
MAX_GENERATE_BACKLOG_DAYS = 366.0

MAX_SHARE = 1e6
MIN_SHARE = 1e-6
"""Org and budget-revision shares are weights in ``[MIN_SHARE, MAX_SHARE]``."""

MAX_RATE = 1000.0
MIN_RATE = 1e-3
"""GPU exchange rates (H100-equivalents per GPU) lie in ``[MIN_RATE, MAX_RATE]``."""

MAX_URGENT_CHARGE = 100.0
MAX_PRIORITY = 1_000_000
"""Job priorities lie in ``[-MAX_PRIORITY, MAX_PRIORITY]``."""

MAX_SIMULATED_SLICES = 400_000
"""Most slices one simulation spans: the simulator charges usage at every slice, so its
cost grows with them (ten years of the default 15-minute slices, 350,400, took about a
minute on the tiny scenario, two shared cores)."""

MAX_SEED = 2**63 - 1
MAX_EPOCH_SECONDS = 7 * 86400.0
MAX_LOOKBACK_SECONDS = 366 * 86400.0
