"""The load predictor: TTFT and throughput of a stack for every cell of the benchmark matrix, from a
model of the serving graph (sim.py) and the lab's constants (params.py), checked against the
write-up's published table (docs/predictor.md)."""
