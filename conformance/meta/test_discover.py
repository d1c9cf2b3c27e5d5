"""Discovery: every *ForConditionalGeneration class, aliases folded, modalities sane."""

import transformers

from conformance.discover import SUFFIX, by_name, discover


def _is_pytorch_model(name: str) -> bool:
    obj = getattr(transformers, name, None)
    return (isinstance(obj, type) and type(obj).__name__ != "DummyObject"
            and issubclass(obj, transformers.PreTrainedModel))


def test_every_exported_class_is_discovered_once():
    exported = {n for n in dir(transformers) if n.endswith(SUFFIX)}
    left_out = sorted(exported - set(by_name()))
    # Only non-PyTorch twins may be left out: 4.x exports TF*/Flax* classes (dummies without TF/Flax installed).
    assert all(n.startswith(("TF", "Flax")) and not _is_pytorch_model(n) for n in left_out), left_out[:5]
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

# How many image-text classes a version has is version data: test_versions.py.
