"""The Gate: one change (or several judged together) through the validators, the render and haproxy -c to one
Verdict; knows no server, CLI or reconcile loop."""
