"""How a check reports, and how running one becomes an `Outcome`.

A check is a function ``check(case) -> dict`` (see `registry`). It returns
its metrics when the contract held, raises `ContractViolation(reason,
metrics)` when it ran and the contract was violated, and
`NotApplicable(reason)` when the check does not apply to the model (e.g. no
KV cache), and `HarnessGap(reason)` when the check cannot set itself up for
the model (an `error`: this suite's gap, not the model's). Any other
exception raised while the check runs is a violation too (the model failed
under the check), reported with its type, message and the innermost
transformers frame (`conformance.reasons.one_line`), except where the
suite's own code raised it (`conformance.reasons.raised_in_suite`: the
frame that raised, or the root cause a ContractViolation wraps, is this
package's code): that is a harness error, `error` with a `harness_error`
fingerprint at the suite's site, whatever the check meant to say.
`run_check(check_id, case)` turns all of this into an `Outcome` with
`seconds` and `cpu_seconds` metrics and, when it failed, a fingerprint (the
check's own, else one from the exception or the reason's words); checks
never decide xfail/xpass (the gate does). A check whose required packages
are missing is not run: `run_check` raises `registry.NotInstalled` (one line
naming them and the install command) instead of making an Outcome, so that
"not installed" is never a skip ("does not apply").
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field

import torch

from conformance import fingerprints
from conformance.fingerprints import Fingerprint
from conformance.reasons import innermost, one_line, raised_in_suite, suite_location, suite_site


class ContractViolation(AssertionError):
    """The check ran and its contract did not hold; `fingerprint` says how, when the check knows better than
    its reason's words (`conformance.fingerprints`)."""

    deliberate = True  # a statement about the model, wherever the check raised it (`reasons.raised_in_suite`)

    def __init__(self, reason: str, metrics: dict | None = None, fingerprint: Fingerprint | None = None):
        super().__init__(reason)
        self.reason = reason
        self.metrics = metrics or {}
        self.fingerprint = fingerprint


class NotApplicable(Exception):
    """The check does not apply to this model; the message says why."""

    deliberate = True


class HarnessGap(Exception):
    """The check could not set itself up for this model (its emulation of the model's own generation
    plumbing does not fit): a gap of this suite, reported as `error`, never as a finding about the model."""


@dataclass
class Outcome:
    """The raw result of one cell, before expectations are applied."""

    verdict: str  # pass | fail | skip | error | timeout (conformance.verdicts)
    reason: str = ""
    metrics: dict = field(default_factory=dict)
    traceback: str = ""
    fingerprint: Fingerprint | None = None  # every failing outcome has one


HARNESS_ERROR = "harness error: the suite's own code raised (not a finding about the model)"


def harness_error(exc: BaseException, metrics: dict | None = None) -> Outcome:
    """The outcome of a cell whose check failed in the suite's own code: `error`, fingerprinted at its site."""
    root = innermost(exc)
    return Outcome("error", f"{HARNESS_ERROR}: {one_line(root, location=suite_location(exc))}", dict(metrics or {}),
                   traceback.format_exc(),
                   Fingerprint("harness_error", where=suite_site(exc), error=type(root).__name__))


def run_check(check_id: str, case) -> Outcome:
    """Run one registered check on `case` and classify what happened."""
    from conformance.checks.common.registry import NotInstalled, get, unavailable

    why = unavailable(check_id)
    if why:
        raise NotInstalled(f"{check_id} {why}")
    fn = get(check_id).run
    started = time.perf_counter()
    cpu_started = time.process_time()
    metrics: dict = {}
    try:
        torch.manual_seed(case.seed)
        metrics = fn(case) or {}
        outcome = Outcome("pass", "", metrics)
    except NotApplicable as exc:
        outcome = Outcome("skip", str(exc))
    except HarnessGap as exc:
        outcome = Outcome("error", f"the check could not be set up for this model: {exc}", {},
                          traceback.format_exc())
    except ContractViolation as exc:
        if exc.__cause__ is not None and raised_in_suite(exc.__cause__):
            outcome = harness_error(exc.__cause__, exc.metrics)
        else:
            fingerprint = exc.fingerprint or fingerprints.of_reason(exc.reason, exc.__cause__)
            outcome = Outcome("fail", exc.reason, exc.metrics, traceback.format_exc(), fingerprint)
    except Exception as exc:
        if raised_in_suite(exc):
            outcome = harness_error(exc, metrics)
        else:  # the model failed under the check
            outcome = Outcome("fail", one_line(exc), metrics, traceback.format_exc(), fingerprints.of_exception(exc))
    finally:
        # Compiled artifacts must not leak into the next cell; the plugin
        # collects garbage when it moves on to the next model.
        torch._dynamo.reset()
    outcome.metrics["seconds"] = round(time.perf_counter() - started, 3)
    # CPU time of this process: the cost of the cell even on a shared machine.
    outcome.metrics["cpu_seconds"] = round(time.process_time() - cpu_started, 3)
    return outcome
