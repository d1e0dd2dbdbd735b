"""The bench's capacity figures read the sandbox ledger as documented (tools/bench/capacity.py)."""

from __future__ import annotations

from sandbox.ledger import Attempt, Ledger, Lifetime
from tools.bench.capacity import backend_waiting, by_group, spans


def test_node_lifetimes_merge_per_slice_and_count_chips():
    pool = "gke-tpu-v6e-pool"
    nodes = [
        Lifetime("n0", pool, 4, 100.0, 700.0),
        Lifetime("n1", pool, 4, 101.0, 702.0),  # the same slice
        Lifetime("n0", pool, 4, 900.0, None),  # scaled up again, alive at the end
        Lifetime("cpu", "cpu-np", 0, 0.0, None),  # no TPU: not counted
    ]
    assert spans(nodes[:3], until=1000.0) == [[100, 702], [900, 1000]]
    groups = by_group(nodes, until=1000.0)
    assert list(groups) == [pool]
    assert groups[pool]["count"] == 3
    assert groups[pool]["chip_seconds"] == 4 * (600 + 601 + 100)


def test_backend_waiting_is_worker_time_outside_client_attempts():
    ledger = Ledger()
    ledger.tpu_pods = [
        Lifetime("w0", "rl-x-backend-worker-0", 4, 0.0, 1000.0),
        Lifetime("c0", "job-rl-x-convert", 4, 0.0, 50.0),  # not the backend
    ]
    ledger.attempts = [
        Attempt("t1", "rl", started=100.0, steps=[1], ended=400.0),
        Attempt("t2", "rl", started=500.0, steps=[2], ended=900.0),
    ]
    # the worker ran 1000 s, clients 700 s of it: 300 s waiting, 4 chips
    assert backend_waiting(ledger, until=1000.0) == 4 * 300.0
