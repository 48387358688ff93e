"""The reconcile loop: ``routegate reconcile`` follows the state, judges each version with the Gate, isolates
what fails, promotes the rest and writes statuses; uses the Gate."""
