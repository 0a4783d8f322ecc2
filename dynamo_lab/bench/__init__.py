"""The benchmark: the AIPerf sweep against a local twin, and its results as a table and plot."""
