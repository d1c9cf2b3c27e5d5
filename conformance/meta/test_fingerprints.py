"""The gate sees through known failures: fingerprints of real checks on synthetic models, judged by the ratchet.

Each scenario runs the real `compile_prefill` (or `compile_decode`) check on a
small module written to a file, so that code can be moved by lines, takes
the fingerprint a first run records as the expectation, and judges a second
run against it, as the gate does.
"""

from __future__ import annotations

import importlib.util
import textwrap

import pytest
import torch

from conformance.checks.common.outcome import run_check
from conformance.fingerprints import Fingerprint, compare, mask
from conformance.gate.expectations import Expectation, load_for_run, run_conditions
from conformance.gate.ratchet import judge
from conformance.meta.test_checks_compile import synthetic_case

pytestmark = pytest.mark.meta

ONE_BREAK = '''
import torch


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = self.proj(x)
        print("", end="")  # a graph break
        return torch.tanh(y)


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.out = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.out(x)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block, self.head = Block(), Head()

    def forward(self, x):
        return self.head(self.block(x))
'''
SECOND_BREAK = ONE_BREAK.replace("        return self.out(x)", "        print('', end='')  # a second graph break\n"
                                                                 "        return self.out(x)")
MOVED = "\n# a comment that moves every line below it\n\n\n" + ONE_BREAK
CALL_ORDER = '''
import torch


class Model(torch.nn.Module):
    """Untraceable one-time setup on the first call (a lock, a hook installation): only a cold compile breaks."""

    ready = False

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        if not self.ready:
            print("", end="")
            self.ready = True
        return torch.tanh(self.proj(x))
'''
CALL_ORDER_AND_WARM = CALL_ORDER.replace("        return torch.tanh(self.proj(x))",
                                        "        y = self.proj(x)\n        print('', end='')  # breaks warm too\n"
                                        "        return torch.tanh(y)")


def model_from(source: str, folder) -> type:
    """The class `Model` of `source`, written to `<folder>/synthetic_model.py` (the same module name each time)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "synthetic_model.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(f"synthetic_model_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Model


def fingerprint_of(source: str, folder) -> Fingerprint:
    case = synthetic_case(model_from(source, folder), {"x": torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(0))})
    outcome = run_check("compile_prefill", case)
    assert outcome.verdict == "fail", outcome.reason
    return outcome.fingerprint


def listed(fingerprint: Fingerprint) -> Expectation:
    return Expectation("Synthetic", "compile_prefill", "fail", "known graph break", fingerprint=fingerprint)


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Fingerprint:
    return fingerprint_of(ONE_BREAK, tmp_path_factory.mktemp("base"))


def test_a_known_failure_is_xfail_and_says_where(base, tmp_path):
    assert base.kind == "graph_break" and base.cold == "fail" and base.warm == "fail"
    assert base.where.endswith("synthetic_model:Block.forward")
    assert base.breaks >= 1 and [site.split(" @ ")[1] for site in base.sites] == [base.where]  # dynamo's count
    assert judge("fail", listed(base), fingerprint_of(ONE_BREAK, tmp_path)).verdict == "xfail"


def test_moving_the_failing_code_by_some_lines_is_the_same_failure(base, tmp_path):
    assert fingerprint_of(MOVED, tmp_path) == base
    assert judge("fail", listed(base), fingerprint_of(MOVED, tmp_path / "again")).verdict == "xfail"


def test_a_second_graph_break_turns_the_cell_red_naming_it(base, tmp_path):
    observed = fingerprint_of(SECOND_BREAK, tmp_path)
    judgement = judge("fail", listed(base), observed)
    assert judgement.verdict == "fail"
    assert "new graph-break site" in judgement.note and "Head.forward" in judgement.note
    assert "conformance expectations --update" in judgement.note


def test_one_fewer_graph_break_asks_for_an_update(base, tmp_path):
    two = fingerprint_of(SECOND_BREAK, tmp_path)
    judgement = judge("fail", listed(two), base)
    assert judgement.verdict == "xpass"
    assert judgement.note.startswith(f"improved: {two.breaks} -> {base.breaks} breaks") and "--update" in judgement.note


def test_a_warm_compile_failure_added_to_a_call_order_cell_turns_it_red(tmp_path):
    call_order = fingerprint_of(CALL_ORDER, tmp_path / "a")
    assert (call_order.kind, call_order.cold, call_order.warm) == ("call_order", "fail", "pass")
    both = fingerprint_of(CALL_ORDER_AND_WARM, tmp_path / "b")
    assert (both.cold, both.warm) == ("fail", "fail")
    judgement = judge("fail", listed(call_order), both)
    assert judgement.verdict == "fail" and "failure changed" in judgement.note and "warm fail" in judgement.note


def test_an_expectation_without_a_fingerprint_accepts_nothing(base):
    judgement = judge("fail", Expectation("Synthetic", "compile_prefill", "fail", "old entry"), base)
    assert judgement.verdict == "fail" and "without a fingerprint" in judgement.note


def test_a_pass_or_an_unlisted_failure_is_judged_as_before(base):
    assert judge("pass", listed(base), None).verdict == "xpass"
    assert judge("fail", None, base).verdict == "fail"
    assert judge("skip", listed(base), None).verdict == "skip"


def test_more_recompiles_change_fewer_improve():
    once = Fingerprint("recompile", recompiles=1, guard="# == # @ m:f")
    thrice = Fingerprint("recompile", recompiles=3, guard="# == # @ m:f")
    assert compare(once, thrice).status == "changed"
    assert compare(thrice, once).status == "improved"
    assert compare(once, Fingerprint("recompile", recompiles=1, guard="other @ m:g")).status == "changed"


def test_masking_keeps_words_not_measurements():
    assert mask("logits differ from eager by 0.0123 > 1e-05 at shape (2, 27, 256)") == \
        "logits differ from eager by # > # at shape #"


def test_an_expectation_of_a_cpu_float32_eager_run_is_not_applied_to_a_cuda_bfloat16_run(tmp_path):
    path = tmp_path / "5.24.toml"
    path.write_text('[conditions]\ndevice = "cpu"\ndtype = "float32"\nbackend = "eager"\n\n'
                    '[[cell]]\nmodel = "M"\ncheck = "build"\nverdict = "fail"\nreason = "r"\n'
                    '[cell.fingerprint]\nkind = "exception"\nerror = "ValueError"\n')
    cpu = load_for_run(run_conditions("cpu", "float32", "eager", "2.13.0+cpu"), path)
    assert list(cpu.cells) == [("M", "build")] and cpu.sources[0].cells == 1
    cuda = load_for_run(run_conditions("cuda:0", "bfloat16", "inductor", "2.13.0"), path)
    assert cuda.cells == {} and cuda.sources == ()


def _raise_through_a_check_wrapper(stamped_stack):
    """A backend error (raised here: outside the suite, as torch's or a backend's code is) whose tracing-context
    stack names only the suite's check that called the backend, as ExecuTorch's lowering stamps it."""
    def backend_lowering():
        error = AssertionError("verifier refused the graph")
        error.real_stack = stamped_stack
        raise error
    try:
        backend_lowering()
    except AssertionError as exc:
        return exc


def test_a_backend_failure_raised_through_a_check_is_sited_at_the_backend_not_the_check():
    import traceback

    from conformance.reasons import SUITE, exception_site, site_of
    check_frame = traceback.FrameSummary(str(SUITE / "checks" / "executorch.py"), 95, "build")
    exc = _raise_through_a_check_wrapper(traceback.StackSummary.from_list([check_frame]))
    assert exception_site(exc).endswith("_raise_through_a_check_wrapper.<locals>.backend_lowering")
    assert not site_of([check_frame, *traceback.extract_tb(exc.__traceback__)]).startswith("conformance.checks")
    assert site_of([check_frame]).startswith("conformance.checks.executorch:")  # no frame outside the suite


def test_a_violation_re_raised_with_metrics_keeps_the_site_of_the_exception_it_wraps():
    """A served column re-raises its export's violation with more metrics (`served.serve`); the cell's fingerprint
    is that of the backend error the first violation wraps, not of the frame that wrapped it."""
    from conformance.checks.common.outcome import ContractViolation
    from conformance.fingerprints import of_reason

    def backend():
        raise KeyError("operator not in the opset")

    def lower():
        try:
            backend()
        except KeyError as exc:
            raise ContractViolation(f"lowering failed: {exc}") from exc

    try:
        try:
            lower()
        except ContractViolation as exc:
            raise ContractViolation(exc.reason, {"static_export": "fail"}, exc.fingerprint) from exc
    except ContractViolation as outer:
        found = of_reason(outer.reason, outer.__cause__)
    assert found.error == "KeyError"
    assert found.where.endswith("test_a_violation_re_raised_with_metrics_keeps_the_site_of_the_exception_it_wraps"
                                ".<locals>.backend")


def test_a_reason_names_an_installed_packages_file_from_the_package_on_never_this_machines_venv():
    from conformance.reasons import one_line

    error = RuntimeError("Caused by: (.venv-pub/lib/python3.11/site-packages/executorch/exir/tensor.py:12 in f)")
    assert one_line(error, location="") == "RuntimeError: Caused by: (executorch/exir/tensor.py:12 in f)"


def test_a_failure_in_a_transformers_checkout_reads_as_the_same_failure_installed():
    """A PR gate runs HEAD from an editable checkout (`.../transformers/src/transformers/`) and the merge base from a
    worktree: the same failure must read the same in both, or the merge-base judgement calls an unchanged failure
    'changed by this change' (it did, for LightOnOcr's onnx_generate, on 2026-12-04)."""
    from conformance.checks.common import exporters as exporters_check
    from conformance.reasons import one_line, where

    def raised_in(path: str) -> BaseException:
        try:
            exec(compile("raise ValueError('no')", path, "exec"), {})
        except ValueError as exc:
            return exc
        raise AssertionError("did not raise")

    installed = "/v/.venv/lib/python3.11/site-packages/transformers/exporters/exporter_dynamo.py"
    checkout = "/work/transformers/src/transformers/exporters/exporter_dynamo.py"
    worktree = "/home/u/.cache/vlm-conformance/worktrees/abc/src/transformers/exporters/exporter_dynamo.py"
    assert {where(raised_in(p)) for p in (installed, checkout, worktree)} == {"transformers/exporters/exporter_dynamo.py:1"}
    texts = {one_line(RuntimeError(f'File "{p}", line 125, in export'), location="") for p in (installed, checkout)}
    assert texts == {'RuntimeError: File "transformers/exporters/exporter_dynamo.py", line 125, in export'}
    reasons = {str(exporters_check.exporter_failure(RuntimeError(f'boom\n  File "{p}", line 125, in export'),
                                                    "export", {})) for p in (installed, checkout)}
    assert reasons == {"export: RuntimeError: boom (at transformers/exporters/exporter_dynamo.py:125)"}


def test_a_recompile_reason_names_the_guards_file_from_the_package_on():
    """dynamo writes a guard's file relative to the working directory (`.venv-tf457/lib/...` when the venv's python
    was called by a relative path): the reason says `transformers/...`, whichever venv or checkout ran it."""
    from conformance.checks.common.dynamo import describe_guard

    for prefix in (".venv-tf457/lib/python3.11/site-packages/", "/work/transformers/src/"):
        reason = f"L['x'].cumulative_length == 16  # {prefix}transformers/cache_utils.py:406 in update"
        assert describe_guard(reason) == "L['x'].cumulative_length == 16 (at transformers/cache_utils.py:406 in update)"
