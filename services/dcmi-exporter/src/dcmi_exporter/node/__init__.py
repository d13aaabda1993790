"""The node as the exporter reads it: the read loop per chip (`poller`), its call pool (`calls`), the
immutable snapshot and the rules that build it (`snapshot`), the event log (`events`)."""
