"""A pull request that breaks half precision only is red when the gate runs as a pull request runs it.

`tox -e pr` runs ``conformance jobs gate --since origin/main...HEAD --transformers-repo DIR --root ROOT -o OUT``:
no group named, the merge base of the range judged against. Here the same command line goes through the real
`conformance` CLI over a fake checkout (git, the planted models in ``src/`` as transformers keeps its package):
at the base one model is right in every dtype (`planted.TinyLM`), the pull request makes it
`planted_dtype.Float32MinimumLM` (right in float32, -inf logits in bfloat16 and float16). The classes the
change impacts (a real transformers' code graph, which a fake checkout has none of) and the harness's own run
options (one check, `build`, the planted project's matrix module) are set in the request the CLI makes; its
column groups are the CLI's default: every group, the half-precision ones included.
"""

from __future__ import annotations

import dataclasses

import pytest

from conformance import locations
from conformance.meta import gate_project

pytestmark = [pytest.mark.meta, pytest.mark.xdist_group("gate_half_pr")]

BASE = '''
from conformance.meta.planted import TinyLM


class HalfRegressingLM(TinyLM):
    """Right in every dtype at the base; the pull request breaks it in half precision only."""


NAMES = ["HalfRegressingLM", "TinyLM"]
'''
HEAD = (BASE.replace("class HalfRegressingLM(TinyLM)", "class HalfRegressingLM(Float32MinimumLM)")
        .replace("import TinyLM\n", "import TinyLM\nfrom conformance.meta.planted_dtype import Float32MinimumLM\n"))


@pytest.fixture(scope="module")
def pr_gate(tmp_path_factory):
    """(exit status, the gate's envelope, the request the CLI made) of ``conformance jobs gate --since``."""
    from conformance.run import options
    from conformance.tools import cli, job_gate

    repo = tmp_path_factory.mktemp("checkout")
    base = gate_project.fake_checkout(repo, BASE, HEAD, "the pull request: a bf16-only regression")
    root = gate_project.make_root(tmp_path_factory.mktemp("root"))
    made, real_run_gate = {}, job_gate.run_gate

    def run_planted(request):
        made["request"] = request
        return real_run_gate(dataclasses.replace(
            request, workers=1, checks=("build",), target="test_matrix.py", pytest_args=gate_project.PYTEST_ARGS,
            env={"PYTHONPATH": f"{repo / 'src'}:{locations.REPOSITORY}"}, package="gate_models"))

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CONFORMANCE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        patch.setattr(options, "resolve_selection",
                      lambda config, source: options.Selection(["HalfRegressingLM", "TinyLM"], impact=True))
        patch.setattr(job_gate, "run_gate", run_planted)
        status = cli.main(["jobs", "gate", "--since", "HEAD~1...HEAD", "--transformers-repo", str(repo),
                           "--root", str(root), "-o", "pr.json"])
    import json

    return status, json.loads((root / "pr.json").read_text()), made["request"], base


def test_a_bf16_only_regression_turns_the_pr_gate_red_without_naming_a_group(pr_gate):
    status, envelope, request, base = pr_gate
    assert request.groups == () and request.base == base  # every group; judged against the merge base
    assert status == 1
    cells = envelope["models"]["HalfRegressingLM"]["cells"]
    assert cells["build"]["verdict"] == "pass"  # float32 holds
    for column in ("build~bf16", "build~fp16"):
        assert cells[column]["verdict"] == "fail" and cells[column]["base"] == "pass", column
        assert "passes on the base" in cells[column]["gate"]
    assert {c["verdict"] for c in envelope["models"]["TinyLM"]["cells"].values()} == {"pass"}
    assert ["HalfRegressingLM", "build~bf16"] in envelope["merge_base"]["regressed"]
    assert {"plain~bf16", "plain~fp16"} <= {job["group"] for job in envelope["gate_run"]["jobs"]}
