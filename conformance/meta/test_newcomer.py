"""Meta tests of what a newcomer meets first (issue 56): `--models` takes what people type, and says what it
would have taken when it takes nothing.
"""

from __future__ import annotations

import pytest

from conformance.discover import NoMatch, select_classes
from conformance.run import options

pytestmark = pytest.mark.meta

LLAVA, NEXT, PALI = "LlavaForConditionalGeneration", "LlavaNextForConditionalGeneration", "PaliGemmaForConditionalGeneration"
NAMES = [LLAVA, NEXT, PALI]
INDEX = {n: n for n in NAMES}
TYPES = {LLAVA: "llava", NEXT: "llava_next", PALI: "paligemma"}


def select(*patterns: str) -> list[str]:
    return select_classes(list(patterns), INDEX, NAMES, TYPES)


# --------------------------------------------------------------------------- --models


@pytest.mark.parametrize("pattern, selected", [
    ("llava", [LLAVA]),  # a model type
    ("PaliGemma", [PALI]),  # a model type, in another case
    ("paligemmaforconditionalgeneration", [PALI]),  # a class name, in any case
    ("*Llava*", [LLAVA, NEXT]),  # a glob over class names
    ("llava*", [LLAVA, NEXT]),  # ... and over model types
    ("LLAVA_NEXT", [NEXT]),
])
def test_models_takes_class_names_model_types_and_globs_in_any_case(pattern, selected):
    assert select(pattern) == selected


def test_models_names_the_pattern_that_selects_nothing_and_the_nearest_names():
    with pytest.raises(NoMatch) as raised:
        select("llava", "Lava")
    assert raised.value.pattern == "Lava" and LLAVA in raised.value.close
    assert str(raised.value).startswith("no discovered class matches 'Lava'; did you mean ")
    with pytest.raises(NoMatch, match="see `conformance list` for the names"):
        select("Zzzzzzzz")


class Source:
    """A case source of three classes, as the run sees one (index, names, rows)."""

    def index(self):
        return dict(INDEX)

    def names(self):
        return list(NAMES)

    def rows(self, names):
        return {n: {"model_type": TYPES[n]} for n in names}


class Options:
    def __init__(self, models: str):
        self.values = {"models": models, "changed_files": [], "since": "", "transformers_repo": ""}

    def getoption(self, name):
        return self.values[name]


def test_the_run_selects_model_types_and_stops_with_one_line_that_suggests_the_nearest():
    assert options.select_models(Options("llava,PALIGEMMA"), Source()) == [LLAVA, PALI]
    with pytest.raises(options.UsageError) as raised:
        options.select_models(Options("Lava"), Source())
    message = str(raised.value)
    assert "\n" not in message and message.startswith("--models: no discovered class matches 'Lava'; did you mean ")
    assert LLAVA in message


def test_explain_resolves_a_model_type_and_suggests_the_nearest_class():
    from conformance.tools import explain

    assert explain.resolve_model("llava").name == LLAVA
    assert explain.resolve_model("paligemmaforconditionalgeneration").name == PALI
    with pytest.raises(explain.ExplainError, match=f"unknown class 'Lava'; did you mean .*{LLAVA}"):
        explain.resolve_model("Lava")
    with pytest.raises(explain.ExplainError, match="selects .* classes"):
        explain.resolve_model("*Llava*")
