"""A site names the same code wherever transformers lives and however the path to it is written.

Dynamo prints a guard's frame relative to torch's parent folder (`torch.utils._traceback.format_frame`):
``transformers/cache_utils.py`` when transformers sits beside torch, a path that keeps a site-packages folder when it
does not, a bare name for a file it got so; a traceback names it absolutely, below a venv inside or outside the
checkout, a tox env, a user site or an editable checkout's ``src/``. Each form, through `reasons.site`,
`dynamo.guard_site` and the reproducers' verification (a printed traceback's frame, `repro_verify`), gives the site the absolute installed path
gives: ``transformers.cache_utils:<class>.update``, its qualname read from the real file.
"""

from __future__ import annotations

import inspect
import shutil
import sys
import traceback
import types
from pathlib import Path

import pytest

from conformance import reasons
from conformance.report import repro_verify

pytestmark = pytest.mark.meta

cache_utils = pytest.importorskip("transformers.cache_utils")
INSTALLED = Path(cache_utils.__file__)
UPDATE = cache_utils.DynamicLayer.update
SOURCE, FIRST = inspect.getsourcelines(UPDATE)
LINE = FIRST + len(SOURCE) - 1  # the last line of DynamicLayer.update, wherever this version has it
EXPECTED = f"transformers.cache_utils:{UPDATE.__qualname__}"
GUARD = "kwargs['past_key_values'].layers[0].cumulative_length_int == 18"


def _forms(tmp_path: Path) -> dict[str, str]:
    """Every way a path to the installed cache_utils.py reaches a site function."""
    venv = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "transformers"  # outside any sys.path entry
    checkout = tmp_path / "transformers" / "src" / "transformers"  # an editable checkout, not imported
    for folder in (venv, checkout):
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("")
        shutil.copy(INSTALLED, folder / "cache_utils.py")
    from torch.utils._traceback import format_frame

    printed = format_frame(traceback.FrameSummary(str(INSTALLED), LINE, "update"))  # as dynamo prints this machine's
    return {
        "absolute, installed": str(INSTALLED),
        "venv outside the checkout": str(venv / "cache_utils.py"),
        "venv of another machine": "/home/ci/project/.venv/lib/python3.11/site-packages/transformers/cache_utils.py",
        "tox env": "/w/vlm-conformance/.tox/tf523/lib/python3.11/site-packages/transformers/cache_utils.py",
        "user site": "/home/u/.local/lib/python3.11/site-packages/transformers/cache_utils.py",
        "system dist-packages": "/usr/lib/python3/dist-packages/transformers/cache_utils.py",
        "editable checkout on disk": str(checkout / "cache_utils.py"),
        "editable checkout elsewhere": "/x/transformers/src/transformers/cache_utils.py",
        "relative (dynamo, beside torch)": "transformers/cache_utils.py",
        "relative, parent folders": "../../transformers/cache_utils.py",
        "relative, torch elsewhere (dynamo)": "venv-tf523/lib/python3.11/site-packages/transformers/cache_utils.py",
        "bare": "cache_utils.py",
        "dynamo's own print": printed.rsplit(":", 2)[0],
    }


FORMS = ["absolute, installed", "venv outside the checkout", "venv of another machine", "tox env", "user site",
         "system dist-packages", "editable checkout on disk", "editable checkout elsewhere",
         "relative (dynamo, beside torch)", "relative, parent folders", "relative, torch elsewhere (dynamo)", "bare",
         "dynamo's own print"]


@pytest.mark.parametrize("form", FORMS)
def test_every_form_of_a_path_gives_the_installed_site(form, tmp_path):
    path = _forms(tmp_path)[form]
    assert reasons.site(path, LINE, "update") == EXPECTED
    assert reasons.module_of(path) == "transformers.cache_utils"
    printed = f'Traceback (most recent call last):\n  File "{path}", line {LINE}, in update\n    x\nValueError: boom\n'
    assert repro_verify.observed(repro_verify.Run(1, 0.0, printed))["where"] == EXPECTED


@pytest.mark.parametrize("form", FORMS)
def test_every_form_of_a_guard_failure_gives_the_installed_site(form, tmp_path):
    from conformance.checks.common.dynamo import guard_site

    path = _forms(tmp_path)[form]
    reason = f"0/0: {GUARD:<60}  # self.cumulative_length_int += kv_length  # {path}:{LINE} in update"
    site = "kwargs['past_key_values'].layers[#].cumulative_length_int == # @ " + EXPECTED
    assert guard_site(reason) == site


def test_a_model_file_in_each_form():
    modeling = pytest.importorskip("transformers.models.llava.modeling_llava")
    method = modeling.LlavaModel.get_image_features
    source, first = inspect.getsourcelines(method)
    line = first + len(source) - 1
    expected = f"transformers.models.llava.modeling_llava:{method.__qualname__}"
    for path in (modeling.__file__, "transformers/models/llava/modeling_llava.py", "modeling_llava.py",
                 "/x/transformers/src/transformers/models/llava/modeling_llava.py"):
        assert reasons.site(path, line, "get_image_features") == expected, path


def test_of_several_files_a_bare_name_fits_the_one_whose_definition_there_is_the_frame_s(tmp_path, monkeypatch):
    """A second loaded module with a cache_utils.py: the bare name goes to the file whose definition around the
    line is named as dynamo said (update), not to the shorter module name."""
    other = tmp_path / "cache_utils.py"
    other.write_text("\n" * (LINE - 2) + "def elsewhere():\n    return 1\n" + "\n" * 5)
    module = types.ModuleType("cache_utils")
    module.__file__ = str(other)
    monkeypatch.setitem(sys.modules, "cache_utils", module)
    assert reasons.site("cache_utils.py", LINE, "update") == EXPECTED
    assert reasons.site("cache_utils.py", LINE, "elsewhere") == "cache_utils:elsewhere"


def test_names_that_are_no_file_keep_their_meaning():
    assert reasons.site("<string>", 3, "f") == "<string>:f"
    assert reasons.module_of("<frozen importlib._bootstrap>") == "<frozen importlib._bootstrap>"
    assert reasons.module_of(reasons.__file__) == "conformance.reasons"
    assert reasons.module_of("/nowhere/at/all/thing.py") == "thing"
