"""`dynamo-lab advise STACK`: which layout this cluster should run for this workload, before it deploys.

candidates lists the layouts the cluster's GPU classes allow (docs/advise.md, "What it searches");
search keeps those the sizing and preflight accept, predicts each with the predictor, and ranks
them for a goal; uncertainty is what the predictor's validation against the lab's table measured;
text words the answer, every figure labelled an estimate; write makes the winner a stack file.
"""
