"""The shared control plane: lineage, ledger, events, matched comparison, replay lanes, reward fusion."""
