"""The webhook server, the AdmissionReview contract, the Gate, cluster state and the CLI."""
