"""dynamo-lab: deploy and size NVIDIA Dynamo disaggregated serving on a small GPU lab cluster."""
