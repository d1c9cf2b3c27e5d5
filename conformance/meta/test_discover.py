"""Discovery: every *ForConditionalGeneration class, aliases folded, modalities sane."""

import transformers

from conformance.discover import SUFFIX, by_name, discover


def test_every_exported_class_is_discovered_once():
    exported = {n for n in dir(transformers) if n.endswith(SUFFIX)}
    index = by_name()
    assert exported <= set(index) | {n for n in exported if not isinstance(getattr(transformers, n, None), type)}
    names = [i.name for i in discover()]
    assert len(names) == len(set(names))
    assert names == sorted(names)


def test_aliases_point_to_the_same_class():
    for info in discover():
        for alias in info.aliases:
            assert getattr(transformers, alias) is info.model_class
            assert by_name()[alias] is info


def test_modalities_always_include_text_and_image_text_implies_image():
    for info in discover():
        assert "text" in info.modalities or "audio" in info.modalities
        if info.is_image_text:
            assert "image" in info.modalities


def test_image_text_classes_are_many():
    assert sum(i.is_image_text for i in discover()) >= 50
