"""Cost of admission policies per reviewed object, as a ratio to the rules alone, in one run.

Times ``Checks.run`` (schema-less rules: the HAProxy rules and the cross-object checks) and the same
wrapped in ``PolicyChecks`` with the policies of tests/data/policies (one ValidatingAdmissionPolicy with a
comprehension, the two routegate policies of issue 30 §2) on the captured HTTPRoute, alternating passes,
CPU time of this thread. Run from the repository root: ``python bench/bench_policies.py [--runs 500]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from validators.changes import Change, Operation
from validators.checks import Checks
from validators.policies import ownpolicies, vaps
from validators.policies.policychecks import PolicyChecks
from validators.states import MemoryState
from webhook.gate import assembly
from webhook.loading import inputs, settingsfiles

HERE = Path(__file__).resolve().parents[1]
DATA = HERE / "tests" / "data"
REVIEW = Path("/work/shared/fixtures/admission-reviews/03-httproute-create.json")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=500)
    args = parser.parse_args()
    objects = [assembly.with_namespace(i.obj) for i in inputs.load(
        [str(DATA / "webhook" / "state" / "cluster.yaml"), str(DATA / "policies" / "namespaces.yaml")])]
    state = MemoryState(objects)
    rules = Checks(schemas=None)
    own = ownpolicies.parse(settingsfiles.load(str(DATA / "policies" / "config.yaml")).policies)
    vap = vaps.PolicySet.of(i.obj for i in inputs.load([str(DATA / "policies" / "vaps.yaml")]))
    with_policies = PolicyChecks(rules, vap=vap, own=own)
    change = Change(Operation.CREATE, json.loads(REVIEW.read_text())["request"]["object"], None)
    timings: dict[str, list[float]] = {"rules": [], "rules+policies": [], "audit (traffic from attachments)": []}
    runs = {"rules": rules.run, "rules+policies": with_policies.run,
            "audit (traffic from attachments)": with_policies.audit_run}
    for run in runs.values():
        run(change, state)  # warm: compiled programs, indexes
    for _ in range(args.runs):
        for name, run in runs.items():
            start = time.thread_time()
            run(change, state)
            timings[name].append(time.thread_time() - start)
    base = statistics.median(timings["rules"])
    for name, values in timings.items():
        median = statistics.median(values)
        print(f"{name:34} median {median * 1e6:7.0f} us  ratio to rules {median / base:5.2f}")


if __name__ == "__main__":
    main()
