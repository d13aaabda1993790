"""The reactor and what it owns: the one task that applies the inbox's inputs to the policy engine.

Ingest follows the exporter into the inbox (inputs), restore rebuilds the engine from the store at
start, isolation keeps ManuallySeparateNPU, and what the reactor decides is published (published,
verdicts) for the device-info writer, the API and hot reset to read.
"""
