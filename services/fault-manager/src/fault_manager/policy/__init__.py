"""The fault policy: the engine (pure, explicit time), where the policy comes from (keeper), and the
same engine run offline over a timeline or a node's database (replay)."""
