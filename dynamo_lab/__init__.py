"""The lab tools, for a laptop: render under mocks, review, sizing text, local probe, twin, benchmark.

They import the deployed program (`infra.*`) and never the reverse; nothing here runs in the
cluster or under `pulumi up`.
"""
