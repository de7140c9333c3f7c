"""Analysis of experiment results (flow completion times, ...)."""
